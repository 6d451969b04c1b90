//! The images a node reports in its status (what the scheduler's
//! ImageLocality plugin scores): those its pods' containers used, with a
//! size that is stable per image, largest first, at most 50 as the
//! kubelet's `nodeStatusMaxImages`.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ContainerImage;
use sha2::{Digest, Sha256};

use crate::pod::container::{image_id, normalized_image};

/// The kubelet's `nodeStatusMaxImages` default.
const MAX_IMAGES: usize = 50;
const SMALLEST: i64 = 5 << 20;
const SIZE_SPREAD: u64 = 500 << 20;

/// A size between 5 MiB and about 500 MiB, the same for an image every time.
pub fn image_size(image: &str) -> i64 {
    let digest = Sha256::digest(image.as_bytes());
    let seed = u64::from_le_bytes(digest[..8].try_into().unwrap_or_default());
    SMALLEST + (seed % SIZE_SPREAD) as i64
}

/// The status list for `images` (as pod specs name them).
pub fn node_images(images: &BTreeSet<String>) -> Vec<ContainerImage> {
    let mut list: Vec<ContainerImage> = images
        .iter()
        .map(|image| normalized_image(image))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|image| ContainerImage {
            names: Some(vec![image_id(&image), image.clone()]),
            size_bytes: Some(image_size(&image)),
        })
        .collect();
    list.sort_by(|a, b| {
        b.size_bytes
            .cmp(&a.size_bytes)
            .then_with(|| a.names.cmp(&b.names))
    });
    list.truncate(MAX_IMAGES);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_listed_once_largest_first() {
        let images = BTreeSet::from([
            "nginx".to_string(),
            "docker.io/library/nginx:latest".to_string(),
            "redis:7".to_string(),
        ]);
        let list = node_images(&images);
        assert_eq!(list.len(), 2);
        assert!(list[0].size_bytes >= list[1].size_bytes);
        let names: Vec<&String> = list.iter().flat_map(|i| i.names.iter().flatten()).collect();
        assert!(names.iter().any(|n| *n == "docker.io/library/redis:7"));
        assert_eq!(image_size("nginx"), image_size("nginx"));
        let many: BTreeSet<String> = (0..80).map(|i| format!("img{i}")).collect();
        assert_eq!(node_images(&many).len(), 50);
    }
}
