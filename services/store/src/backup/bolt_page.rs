//! The on-disk layout of a bbolt database (etcd's backend), as far as a
//! backup needs it: page headers, the two meta pages, leaf and branch
//! elements and the bucket header. Everything is little-endian, as bbolt
//! writes it on the machines etcd runs on.

use std::hash::Hasher;

use super::error::BackupError;

/// The page size etcd's database has on Linux (the OS page size).
pub const PAGE_SIZE: usize = 4096;
pub const PAGE_HEADER: usize = 16;
/// Leaf and branch elements are both 16 bytes.
pub const ELEMENT: usize = 16;
/// A bucket's value starts with its root page and sequence.
pub const BUCKET_HEADER: usize = 16;

pub const BRANCH: u16 = 0x01;
pub const LEAF: u16 = 0x02;
pub const META: u16 = 0x04;
pub const FREELIST: u16 = 0x10;
/// A leaf element whose value is a nested bucket.
pub const BUCKET_LEAF_FLAG: u32 = 0x01;

const MAGIC: u32 = 0xED0C_DAED;
const VERSION: u32 = 2;
/// The meta fields covered by its checksum (everything before it).
const META_SUMMED: usize = 56;

/// The 16 bytes that start every page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    pub id: u64,
    pub flags: u16,
    pub count: u16,
    /// Further pages this one spans.
    pub overflow: u32,
}

impl PageHeader {
    pub fn write(&self, page: &mut [u8]) {
        page[0..8].copy_from_slice(&self.id.to_le_bytes());
        page[8..10].copy_from_slice(&self.flags.to_le_bytes());
        page[10..12].copy_from_slice(&self.count.to_le_bytes());
        page[12..16].copy_from_slice(&self.overflow.to_le_bytes());
    }

    pub fn read(page: &[u8]) -> PageHeader {
        PageHeader {
            id: le_u64(&page[0..8]),
            flags: u16::from_le_bytes([page[8], page[9]]),
            count: u16::from_le_bytes([page[10], page[11]]),
            overflow: le_u32(&page[12..16]),
        }
    }
}

/// A meta page's content: where the tree of buckets and the free list are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub page_size: u32,
    /// The root bucket's root page.
    pub root: u64,
    pub freelist: u64,
    /// The high-water mark: pages below it are in use or free.
    pub pgid: u64,
    pub txid: u64,
}

impl Meta {
    /// Meta page `id` (0 or 1), checksummed.
    pub fn page(&self, id: u64) -> Vec<u8> {
        let mut page = vec![0; self.page_size as usize];
        PageHeader {
            id,
            flags: META,
            count: 0,
            overflow: 0,
        }
        .write(&mut page);
        let body = &mut page[PAGE_HEADER..];
        body[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        body[4..8].copy_from_slice(&VERSION.to_le_bytes());
        body[8..12].copy_from_slice(&self.page_size.to_le_bytes());
        // flags (4 bytes) stay zero; the root bucket's sequence too.
        body[16..24].copy_from_slice(&self.root.to_le_bytes());
        body[32..40].copy_from_slice(&self.freelist.to_le_bytes());
        body[40..48].copy_from_slice(&self.pgid.to_le_bytes());
        body[48..56].copy_from_slice(&self.txid.to_le_bytes());
        let sum = checksum(&body[..META_SUMMED]);
        body[56..64].copy_from_slice(&sum.to_le_bytes());
        page
    }

    /// The meta in the first bytes of a meta page, if it is intact.
    pub fn read(page: &[u8]) -> Result<Meta, BackupError> {
        if page.len() < PAGE_HEADER + 64 {
            return Err(BackupError::Invalid("shorter than a meta page".into()));
        }
        let body = &page[PAGE_HEADER..];
        if le_u32(&body[0..4]) != MAGIC {
            return Err(BackupError::Invalid(
                "not a bbolt database (bad magic)".into(),
            ));
        }
        if le_u32(&body[4..8]) != VERSION {
            return Err(BackupError::Invalid("unsupported bbolt version".into()));
        }
        if checksum(&body[..META_SUMMED]) != le_u64(&body[56..64]) {
            return Err(BackupError::Invalid("meta page checksum mismatch".into()));
        }
        Ok(Meta {
            page_size: le_u32(&body[8..12]),
            root: le_u64(&body[16..24]),
            freelist: le_u64(&body[32..40]),
            pgid: le_u64(&body[40..48]),
            txid: le_u64(&body[48..56]),
        })
    }
}

/// bbolt's meta checksum: 64-bit FNV-1a.
fn checksum(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// An empty free list page (a backup has no free pages).
pub fn freelist_page(id: u64) -> Vec<u8> {
    let mut page = vec![0; PAGE_SIZE];
    PageHeader {
        id,
        flags: FREELIST,
        count: 0,
        overflow: 0,
    }
    .write(&mut page);
    page
}

/// The value of a bucket whose tree starts at page `root`.
pub fn bucket_value(root: u64) -> [u8; BUCKET_HEADER] {
    let mut value = [0; BUCKET_HEADER];
    value[0..8].copy_from_slice(&root.to_le_bytes());
    value
}

pub fn le_u32(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"))
}

pub fn le_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_page_reads_back_and_a_flipped_bit_is_caught() {
        let meta = Meta {
            page_size: PAGE_SIZE as u32,
            root: 7,
            freelist: 2,
            pgid: 9,
            txid: 3,
        };
        let mut page = meta.page(1);
        assert_eq!(PageHeader::read(&page).flags, META);
        assert_eq!(Meta::read(&page).unwrap(), meta);
        page[PAGE_HEADER + 20] ^= 1;
        assert!(Meta::read(&page).is_err());
    }

    #[test]
    fn the_checksum_is_fnv1a() {
        // FNV-1a 64 of "a", a published test vector.
        assert_eq!(checksum(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
