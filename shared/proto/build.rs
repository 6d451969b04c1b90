//! Compiles the etcd v3 API and Capstan's internal records with protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let etcd = root.join("etcd");
    let capstan = root.join("capstan");
    let files = [
        etcd.join("kv.proto"),
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
