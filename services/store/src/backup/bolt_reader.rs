//! Reads a bbolt database (an etcd snapshot) page by page from a file:
//! the newest intact meta page, then a walk of one bucket's tree in key
//! order. Only the pages on the path being walked are in memory.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::bolt_page::{
    le_u32, le_u64, Meta, PageHeader, BRANCH, BUCKET_HEADER, BUCKET_LEAF_FLAG, ELEMENT, LEAF,
    PAGE_HEADER, PAGE_SIZE,
};
use super::error::BackupError;

/// Where a bucket's pairs are: a tree of pages, or one page inside its
/// parent's value (bbolt keeps small buckets inline).
enum BucketRoot {
    Page(u64),
    Inline(Vec<u8>),
}

/// Called with each pair of a bucket.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), BackupError> + 'a;
/// Called with each element of a leaf: its flags, key and value.
type VisitElement<'a> = dyn FnMut(u32, &[u8], &[u8]) -> Result<(), BackupError> + 'a;

pub struct BoltReader {
    file: File,
    /// Bytes of the file that belong to the database (a snapshot has its
    /// digest after them).
    len: u64,
    meta: Meta,
}

impl BoltReader {
    /// Opens the database in the first `len` bytes of `file`.
    pub fn open(file: File, len: u64) -> Result<BoltReader, BackupError> {
        let mut first = vec![0; 4096.min(len as usize)];
        file.read_exact_at(&mut first, 0)?;
        // Both metas are tried: a crash while bbolt wrote one leaves the
        // other; the newest intact one wins. The second is one page in,
        // by the first's page size or, if the first is damaged, by the
        // usual 4 KiB (as bbolt itself guesses).
        let first_meta = Meta::read(&first);
        let size = first_meta
            .as_ref()
            .map_or(PAGE_SIZE as u64, |m| m.page_size as u64);
        let mut metas = vec![first_meta];
        let mut second = vec![0; size.min(1 << 16) as usize];
        if file.read_exact_at(&mut second, size).is_ok() {
            metas.push(Meta::read(&second));
        }
        let meta = metas
            .into_iter()
            .filter_map(Result::ok)
            .max_by_key(|m| m.txid)
            .ok_or_else(|| BackupError::Invalid("no intact meta page".into()))?;
        if meta.page_size < 512 || meta.pgid * meta.page_size as u64 > len {
            return Err(BackupError::Invalid(format!(
                "{} pages of {} bytes do not fit in {len} bytes",
                meta.pgid, meta.page_size
            )));
        }
        Ok(BoltReader { file, len, meta })
    }

    /// Page `id` with its overflow pages.
    fn page(&self, id: u64) -> Result<Vec<u8>, BackupError> {
        let size = self.meta.page_size as u64;
        if id < 2 || id >= self.meta.pgid {
            return Err(BackupError::Invalid(format!("page {id} is out of bounds")));
        }
        let mut header = [0; PAGE_HEADER];
        self.file.read_exact_at(&mut header, id * size)?;
        let header = PageHeader::read(&header);
        let end = (id + 1 + header.overflow as u64) * size;
        if header.id != id || end > self.len {
            return Err(BackupError::Invalid(format!("page {id} is damaged")));
        }
        let mut page = vec![0; (end - id * size) as usize];
        self.file.read_exact_at(&mut page, id * size)?;
        Ok(page)
    }

    /// Calls `f` with every pair of bucket `name` in key order; false if
    /// there is no such bucket.
    pub fn for_each(&self, name: &[u8], f: &mut Visit) -> Result<bool, BackupError> {
        let mut found = None;
        self.walk(
            &BucketRoot::Page(self.meta.root),
            &mut |flags, key, value| {
                if key == name && flags & BUCKET_LEAF_FLAG != 0 {
                    found = Some(bucket_root(value)?);
                }
                Ok(())
            },
        )?;
        let Some(root) = found else {
            return Ok(false);
        };
        self.walk(&root, &mut |flags, key, value| {
            // Nested buckets are not part of etcd's layout.
            if flags & BUCKET_LEAF_FLAG == 0 {
                f(key, value)?;
            }
            Ok(())
        })?;
        Ok(true)
    }

    fn walk(&self, root: &BucketRoot, f: &mut VisitElement) -> Result<(), BackupError> {
        match root {
            BucketRoot::Inline(page) => walk_leaf(page, f),
            BucketRoot::Page(id) => self.walk_page(*id, f, 0),
        }
    }

    fn walk_page(&self, id: u64, f: &mut VisitElement, depth: usize) -> Result<(), BackupError> {
        // A tree of 4 KiB pages is never this deep; a cycle in a damaged
        // file would be.
        if depth > 64 {
            return Err(BackupError::Invalid(format!("page {id}: tree too deep")));
        }
        let page = self.page(id)?;
        let header = PageHeader::read(&page);
        match header.flags {
            LEAF => walk_leaf(&page, f),
            BRANCH => {
                for i in 0..header.count as usize {
                    let at = PAGE_HEADER + i * ELEMENT;
                    let child = le_u64(slice(&page, at + 8, 8)?);
                    self.walk_page(child, f, depth + 1)?;
                }
                Ok(())
            }
            other => Err(BackupError::Invalid(format!(
                "page {id} has type {other:#x}, not a branch or leaf"
            ))),
        }
    }
}

fn slice(page: &[u8], at: usize, len: usize) -> Result<&[u8], BackupError> {
    page.get(at..at + len)
        .ok_or_else(|| BackupError::Invalid("an element points past its page".into()))
}

/// Calls `f` with the flags, key and value of every element of a leaf.
fn walk_leaf(page: &[u8], f: &mut VisitElement) -> Result<(), BackupError> {
    let header = PageHeader::read(slice(page, 0, PAGE_HEADER)?);
    if header.flags != LEAF {
        return Err(BackupError::Invalid(
            "an inline bucket is not a leaf".into(),
        ));
    }
    for i in 0..header.count as usize {
        let at = PAGE_HEADER + i * ELEMENT;
        let element = slice(page, at, ELEMENT)?;
        let flags = le_u32(&element[0..4]);
        let pos = le_u32(&element[4..8]) as usize;
        let ksize = le_u32(&element[8..12]) as usize;
        let vsize = le_u32(&element[12..16]) as usize;
        let key = slice(page, at + pos, ksize)?;
        let value = slice(page, at + pos + ksize, vsize)?;
        f(flags, key, value)?;
    }
    Ok(())
}

fn bucket_root(value: &[u8]) -> Result<BucketRoot, BackupError> {
    let root = le_u64(slice(value, 0, 8)?);
    if root != 0 {
        return Ok(BucketRoot::Page(root));
    }
    Ok(BucketRoot::Inline(value[BUCKET_HEADER..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::super::bolt_writer::BoltWriter;
    use super::*;

    fn pairs(reader: &BoltReader, bucket: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        reader
            .for_each(bucket, &mut |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn what_the_writer_writes_reads_back_in_order() {
        let file = tempfile::tempfile().unwrap();
        let mut db = BoltWriter::new(file.try_clone().unwrap()).unwrap();
        let big: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000u32)
            .map(|i| (i.to_be_bytes().to_vec(), vec![i as u8; (i % 300) as usize]))
            .collect();
        db.begin(b"key").unwrap();
        for (k, v) in &big {
            db.put(k.clone(), v.clone()).unwrap();
        }
        // A value bigger than a page, and an empty bucket.
        db.begin(b"lease").unwrap();
        db.put(b"huge".to_vec(), vec![9; 10_000]).unwrap();
        db.begin(b"alarm").unwrap();
        db.finish().unwrap();
        let len = file.metadata().unwrap().len();
        assert_eq!(len % 4096, 0);
        let reader = BoltReader::open(file, len).unwrap();
        assert_eq!(pairs(&reader, b"key"), big);
        assert_eq!(
            pairs(&reader, b"lease"),
            [(b"huge".to_vec(), vec![9; 10_000])]
        );
        assert!(pairs(&reader, b"alarm").is_empty());
        assert!(!reader.for_each(b"nope", &mut |_, _| Ok(())).unwrap());
    }

    #[test]
    fn keys_out_of_order_are_refused() {
        let mut db = BoltWriter::new(std::io::Cursor::new(Vec::new())).unwrap();
        assert!(db.put(b"a".to_vec(), vec![]).is_err(), "no bucket yet");
        db.begin(b"key").unwrap();
        db.put(b"b".to_vec(), vec![]).unwrap();
        assert!(db.put(b"a".to_vec(), vec![]).is_err());
        assert!(db.put(b"b".to_vec(), vec![]).is_err());
    }

    #[test]
    fn a_damaged_meta_falls_back_and_two_are_refused() {
        let file = tempfile::tempfile().unwrap();
        let mut db = BoltWriter::new(file.try_clone().unwrap()).unwrap();
        db.begin(b"meta").unwrap();
        db.finish().unwrap();
        let len = file.metadata().unwrap().len();
        let page = |at: u64| {
            let mut page = vec![0; 4096];
            file.read_exact_at(&mut page, at).unwrap();
            page
        };
        let (first, second) = (page(0), page(4096));
        // Either damaged alone: the other one serves.
        file.write_all_at(&[0xff], 40).unwrap();
        assert!(BoltReader::open(file.try_clone().unwrap(), len).is_ok());
        file.write_all_at(&first, 0).unwrap();
        file.write_all_at(&[0xff], 4096 + 40).unwrap();
        assert!(BoltReader::open(file.try_clone().unwrap(), len).is_ok());
        file.write_all_at(&[0xff], 40).unwrap();
        assert!(BoltReader::open(file.try_clone().unwrap(), len).is_err());
        file.write_all_at(&second, 4096).unwrap();
        assert!(BoltReader::open(file, len).is_ok());
    }
}
