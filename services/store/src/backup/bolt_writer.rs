//! Writes a bbolt database in one pass, bottom-up: each bucket's pairs
//! arrive in key order and fill leaf pages that go to the file as soon as
//! they are full; only the first key and page number of each page are kept
//! to build the branch pages above them once the bucket ends. Memory stays
//! a page plus a key per page, however big the bucket.
//!
//! The file has what a bbolt database that was just compacted has: two
//! meta pages, an empty free list, then the pages of every bucket, the
//! root bucket's page last. Every page below the high-water mark is used,
//! which is what bbolt's consistency check (`etcdctl snapshot status`)
//! demands.

use std::io::{BufWriter, Seek, SeekFrom, Write};

use super::bolt_page::{
    bucket_value, freelist_page, Meta, PageHeader, BRANCH, BUCKET_LEAF_FLAG, ELEMENT, LEAF,
    PAGE_HEADER, PAGE_SIZE,
};
use super::error::BackupError;

/// The first page after the metas and the free list.
const FIRST_DATA_PAGE: u64 = 3;
const FREELIST_PAGE: u64 = 2;

/// Pages appended to the file in page-number order.
struct Pages<W: Write + Seek> {
    out: BufWriter<W>,
    next: u64,
}

impl<W: Write + Seek> Pages<W> {
    /// Writes `page` (a whole number of pages) under the next number.
    fn append(&mut self, mut page: Vec<u8>) -> Result<u64, BackupError> {
        let id = self.next;
        page[0..8].copy_from_slice(&id.to_le_bytes());
        self.out.write_all(&page)?;
        self.next += (page.len() / PAGE_SIZE) as u64;
        Ok(id)
    }
}

/// One element of a leaf page.
struct Element {
    flags: u32,
    key: Vec<u8>,
    value: Vec<u8>,
}

/// A node's page: header, elements, then the keys (and values) they point
/// to, spanning as many pages as it needs.
fn node_page(flags: u16, count: usize, data_len: usize) -> Vec<u8> {
    let len = PAGE_HEADER + count * ELEMENT + data_len;
    let pages = len.div_ceil(PAGE_SIZE).max(1);
    let mut page = vec![0; pages * PAGE_SIZE];
    PageHeader {
        id: 0,
        flags,
        count: count as u16,
        overflow: (pages - 1) as u32,
    }
    .write(&mut page);
    page
}

fn leaf_page(elements: &[Element]) -> Vec<u8> {
    let data: usize = elements.iter().map(|e| e.key.len() + e.value.len()).sum();
    let mut page = node_page(LEAF, elements.len(), data);
    let mut at = PAGE_HEADER + elements.len() * ELEMENT;
    for (i, e) in elements.iter().enumerate() {
        let start = PAGE_HEADER + i * ELEMENT;
        let header = &mut page[start..start + ELEMENT];
        header[0..4].copy_from_slice(&e.flags.to_le_bytes());
        header[4..8].copy_from_slice(&((at - start) as u32).to_le_bytes());
        header[8..12].copy_from_slice(&(e.key.len() as u32).to_le_bytes());
        header[12..16].copy_from_slice(&(e.value.len() as u32).to_le_bytes());
        page[at..at + e.key.len()].copy_from_slice(&e.key);
        at += e.key.len();
        page[at..at + e.value.len()].copy_from_slice(&e.value);
        at += e.value.len();
    }
    page
}

fn branch_page(children: &[(Vec<u8>, u64)]) -> Vec<u8> {
    let data: usize = children.iter().map(|(key, _)| key.len()).sum();
    let mut page = node_page(BRANCH, children.len(), data);
    let mut at = PAGE_HEADER + children.len() * ELEMENT;
    for (i, (key, child)) in children.iter().enumerate() {
        let start = PAGE_HEADER + i * ELEMENT;
        let header = &mut page[start..start + ELEMENT];
        header[0..4].copy_from_slice(&((at - start) as u32).to_le_bytes());
        header[4..8].copy_from_slice(&(key.len() as u32).to_le_bytes());
        header[8..16].copy_from_slice(&child.to_le_bytes());
        page[at..at + key.len()].copy_from_slice(key);
        at += key.len();
    }
    page
}

/// One B+tree being built: the leaf being filled and the pages written.
#[derive(Default)]
struct Tree {
    leaf: Vec<Element>,
    leaf_bytes: usize,
    /// First key and page of every leaf written so far.
    leaves: Vec<(Vec<u8>, u64)>,
}

impl Tree {
    fn put<W: Write + Seek>(
        &mut self,
        pages: &mut Pages<W>,
        e: Element,
    ) -> Result<(), BackupError> {
        let last = self
            .leaf
            .last()
            .map(|e| &e.key)
            .or(self.leaves.last().map(|l| &l.0));
        if e.key.is_empty() || last.is_some_and(|last| *last >= e.key) {
            return Err(BackupError::Unsorted(e.key));
        }
        let size = ELEMENT + e.key.len() + e.value.len();
        if !self.leaf.is_empty() && PAGE_HEADER + self.leaf_bytes + size > PAGE_SIZE {
            self.flush_leaf(pages)?;
        }
        self.leaf_bytes += size;
        self.leaf.push(e);
        Ok(())
    }

    fn flush_leaf<W: Write + Seek>(&mut self, pages: &mut Pages<W>) -> Result<(), BackupError> {
        let id = pages.append(leaf_page(&self.leaf))?;
        let first = self.leaf.first().map(|e| e.key.clone()).unwrap_or_default();
        self.leaves.push((first, id));
        self.leaf.clear();
        self.leaf_bytes = 0;
        Ok(())
    }

    /// Writes what is left and the branch levels; returns the root page.
    fn finish<W: Write + Seek>(mut self, pages: &mut Pages<W>) -> Result<u64, BackupError> {
        if !self.leaf.is_empty() || self.leaves.is_empty() {
            self.flush_leaf(pages)?;
        }
        let mut level = self.leaves;
        while level.len() > 1 {
            level = branch_level(pages, level)?;
        }
        Ok(level[0].1)
    }
}

/// Groups `children` into branch pages of at most a page each (at least
/// two children per page, so that the tree gets shorter).
fn branch_level<W: Write + Seek>(
    pages: &mut Pages<W>,
    children: Vec<(Vec<u8>, u64)>,
) -> Result<Vec<(Vec<u8>, u64)>, BackupError> {
    let mut parents = Vec::new();
    let mut group: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut bytes = PAGE_HEADER;
    for child in children {
        let size = ELEMENT + child.0.len();
        if group.len() >= 2 && bytes + size > PAGE_SIZE {
            let first = group[0].0.clone();
            parents.push((first, pages.append(branch_page(&group))?));
            group.clear();
            bytes = PAGE_HEADER;
        }
        bytes += size;
        group.push(child);
    }
    let first = group[0].0.clone();
    parents.push((first, pages.append(branch_page(&group))?));
    Ok(parents)
}

/// A bbolt database being written to `W`, one bucket at a time.
pub struct BoltWriter<W: Write + Seek> {
    pages: Pages<W>,
    /// Name and root page of every finished bucket.
    buckets: Vec<(Vec<u8>, u64)>,
    /// The bucket being written.
    open: Option<(Vec<u8>, Tree)>,
}

impl<W: Write + Seek> BoltWriter<W> {
    pub fn new(out: W) -> Result<BoltWriter<W>, BackupError> {
        let mut pages = Pages {
            out: BufWriter::with_capacity(16 * PAGE_SIZE, out),
            next: 0,
        };
        // The metas and the free list are written last, over these.
        for _ in 0..FIRST_DATA_PAGE {
            pages.append(vec![0; PAGE_SIZE])?;
        }
        Ok(BoltWriter {
            pages,
            buckets: Vec::new(),
            open: None,
        })
    }

    /// Starts bucket `name` (ending the one before); its pairs must be
    /// given in key order.
    pub fn begin(&mut self, name: &[u8]) -> Result<(), BackupError> {
        self.end()?;
        self.open = Some((name.to_vec(), Tree::default()));
        Ok(())
    }

    /// Adds a pair to the bucket begun last; keys must be non-empty and
    /// strictly increasing.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), BackupError> {
        let (_, tree) = self.open.as_mut().ok_or(BackupError::NoBucket)?;
        let e = Element {
            flags: 0,
            key,
            value,
        };
        tree.put(&mut self.pages, e)
    }

    /// Ends the bucket begun last, if any.
    pub fn end(&mut self) -> Result<(), BackupError> {
        if let Some((name, tree)) = self.open.take() {
            let root = tree.finish(&mut self.pages)?;
            self.buckets.push((name, root));
        }
        Ok(())
    }

    /// Whether bucket `name` was written.
    pub fn has(&self, name: &[u8]) -> bool {
        let open = self.open.as_ref().map(|(n, _)| n.as_slice());
        open == Some(name) || self.buckets.iter().any(|(n, _)| n == name)
    }

    /// Writes the root bucket, the free list and the metas; returns the
    /// output, positioned at the end of the database.
    pub fn finish(mut self) -> Result<W, BackupError> {
        self.end()?;
        self.buckets.sort();
        let mut root = Tree::default();
        for (name, page) in std::mem::take(&mut self.buckets) {
            let e = Element {
                flags: BUCKET_LEAF_FLAG,
                key: name,
                value: bucket_value(page).to_vec(),
            };
            root.put(&mut self.pages, e)?;
        }
        let root = root.finish(&mut self.pages)?;
        let high_water = self.pages.next;
        let mut out = self.pages.out.into_inner().map_err(|e| e.into_error())?;
        let meta = Meta {
            page_size: PAGE_SIZE as u32,
            root,
            freelist: FREELIST_PAGE,
            pgid: high_water,
            txid: 1,
        };
        out.seek(SeekFrom::Start(0))?;
        out.write_all(&meta.page(0))?;
        out.write_all(&Meta { txid: 2, ..meta }.page(1))?;
        out.write_all(&freelist_page(FREELIST_PAGE))?;
        out.seek(SeekFrom::Start(high_water * PAGE_SIZE as u64))?;
        Ok(out)
    }
}
