//! Compiles the etcd v3 API and Capstan's internal records with the protoc
//! shipped by the protoc-bin-vendored crate: no system protobuf is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("PROTOC").is_none() {
        // Build scripts run single-threaded, so setting our own variable is sound.
        std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    }
    // Read when the script runs, not when it is compiled: a compiled build
    // script may be reused by another checkout sharing the target folder.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest_dir).join("../../proto");
    let etcd = root.join("etcd");
    let capstan = root.join("capstan");
    let files = [
        etcd.join("kv.proto"),
        etcd.join("auth.proto"),
        etcd.join("rpc.proto"),
        capstan.join("internal.proto"),
        capstan.join("peer.proto"),
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(&files, &[etcd, capstan])?;
    Ok(())
}
