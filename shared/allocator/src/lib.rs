//! The allocator of every Capstan server binary: jemalloc, installed with
//! [`install!`] in each `main.rs`.
//!
//! Why jemalloc. Every request allocates (JSON trees, protobuf messages,
//! watch events, raft entries), so the allocator is both CPU and memory.
//! glibc's malloc cost 15-17% of the CPU samples and kept freed memory in
//! its per-thread arenas. mimalloc cut the CPU, but with 30,000 pods cached
//! `capstan` held about 400 MB of resident memory beyond its 790 MB of live
//! heap (pods are decoded on one thread and freed on others, and every
//! update frees an old version: the pages are left partly used). jemalloc
//! holds the same control plane in 945 MB rather than 1,141 MB, at the same
//! or less CPU (RESULTS.md has the runs).
//!
//! How it is tuned ([`MALLOC_CONF`]): a background thread returns freed
//! pages to the kernel, after a second rather than jemalloc's ten, so the
//! resident size follows the live heap down after a burst; and no
//! transparent huge pages, whose first touch zeroes 2 MB at once.

pub use tikv_jemallocator::Jemalloc;

const OPTIONS: &str = "background_thread:true,dirty_decay_ms:1000,thp:never\0";

/// The length of [`MALLOC_CONF`], its closing NUL included.
pub const MALLOC_CONF_LEN: usize = OPTIONS.len();

/// jemalloc's options, read at its start from the `malloc_conf` symbol
/// (`_rjem_malloc_conf`, as tikv-jemalloc-sys prefixes its names) that
/// [`install!`] defines: a C string, hence the closing NUL.
pub const MALLOC_CONF: &[u8; MALLOC_CONF_LEN] = match OPTIONS.as_bytes().first_chunk() {
    Some(options) => options,
    None => unreachable!(),
};

/// Installs jemalloc as the global allocator, with [`MALLOC_CONF`]. Call it
/// once, at the top level of a binary's `main.rs`.
#[macro_export]
macro_rules! install {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::Jemalloc = $crate::Jemalloc;

        /// jemalloc's `malloc_conf`: a C string it reads when it starts.
        #[allow(non_upper_case_globals)]
        #[export_name = "_rjem_malloc_conf"]
        static malloc_conf: &[u8; $crate::MALLOC_CONF_LEN] = $crate::MALLOC_CONF;
    };
}
