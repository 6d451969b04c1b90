//! How much heap a cached pod holds, whole and thinned as the controller
//! manager, the scheduler and the simulated nodes cache it: a pod a Deployment made, Running
//! on a simulated node (read back with kubectl), decoded a thousand times
//! under an allocator that counts live bytes. Prints the figures; fails
//! if thinning stops saving.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use capstan_client::informer::{
    strip_container_statuses, strip_for_cache, strip_pod_mounts_and_security,
    strip_pod_runtime_details,
};
use k8s_openapi::api::core::v1::Pod;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const COPIES: usize = 1_000;
const POD: &str = include_str!("fixtures/deployment_pod.json");

/// Live heap bytes per pod of `COPIES` decoded pods after `thin`.
fn bytes_per_pod(thin: fn(&mut Pod)) -> isize {
    let before = LIVE.load(Ordering::Relaxed);
    let mut pods: Vec<Box<Pod>> = Vec::with_capacity(COPIES);
    for _ in 0..COPIES {
        let mut pod: Box<Pod> = Box::new(serde_json::from_str(POD).expect("the fixture pod"));
        thin(&mut pod);
        pods.push(pod);
    }
    let after = LIVE.load(Ordering::Relaxed);
    drop(pods);
    (after - before) / COPIES as isize
}

#[test]
fn a_thinned_pod_holds_less_heap_in_each_cache() {
    let whole = bytes_per_pod(strip_for_cache::<Pod>);
    let nodes = bytes_per_pod(|pod| {
        strip_for_cache(pod);
        strip_pod_mounts_and_security(pod);
    });
    let controllers = bytes_per_pod(|pod| {
        strip_for_cache(pod);
        strip_pod_runtime_details(pod);
    });
    let scheduler = bytes_per_pod(|pod| {
        strip_for_cache(pod);
        strip_pod_runtime_details(pod);
        strip_container_statuses(pod);
    });
    println!(
        "bytes per cached pod: {whole} whole (managedFields dropped), {nodes} as the \
         simulated nodes cache it, {controllers} as the controller manager does, \
         {scheduler} as the scheduler does"
    );
    assert!(nodes < whole, "{nodes} < {whole}");
    assert!(controllers < whole, "{controllers} < {whole}");
    assert!(scheduler < controllers, "{scheduler} < {controllers}");
}
