//! The file-system core over emulated devices, no FUSE: operations, reopen, streams, errors.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_device::DeviceRef;
use pagoda_fs::{Fs, FsError, FsOptions, Kind, SetAttr, StreamRules, ROOT};

fn dev(spec: &str) -> DeviceRef {
    DeviceSpec::parse(spec).unwrap().open().unwrap()
}

#[test]
fn files_dirs_links_survive_a_clean_reopen() {
    let d = dev("mem,capacity=16MiB");
    let mut fs = Fs::format(d.clone(), FsOptions::default()).unwrap();
    let dir = fs
        .create(ROOT, "db", Kind::Dir, 0o755, (0, 0), b"")
        .unwrap();
    let f = fs
        .create(dir.ino, "t.ibd", Kind::File, 0o644, (1, 2), b"")
        .unwrap();
    let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(fs.write(f.ino, 100, &data).unwrap(), data.len());
    assert_eq!(fs.read(f.ino, 100, data.len()).unwrap(), data);
    assert_eq!(fs.read(f.ino, 0, 100).unwrap(), vec![0u8; 100]);
    fs.create(ROOT, "l", Kind::Symlink, 0o777, (0, 0), b"db/t.ibd")
        .unwrap();
    fs.link(f.ino, ROOT, "hard").unwrap();
    fs.rename(dir.ino, "t.ibd", ROOT, "moved", false).unwrap();
    assert!(matches!(
        fs.lookup(dir.ino, "t.ibd"),
        Err(FsError::NotFound)
    ));
    assert!(matches!(fs.rmdir(ROOT, "hard"), Err(FsError::NotDir)));
    fs.create(dir.ino, "x", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    assert!(matches!(fs.rmdir(ROOT, "db"), Err(FsError::NotEmpty)));
    fs.unlink(dir.ino, "x").unwrap();
    fs.sync().unwrap();
    drop(fs);

    let mut fs = Fs::open(d, FsOptions::default()).unwrap();
    let m = fs.lookup(ROOT, "moved").unwrap();
    assert_eq!((m.size, m.nlink, m.uid, m.gid), (50_100, 2, 1, 2));
    assert_eq!(fs.read(m.ino, 100, data.len()).unwrap(), data);
    assert_eq!(fs.lookup(ROOT, "hard").unwrap().ino, m.ino);
    let l = fs.lookup(ROOT, "l").unwrap();
    assert_eq!(fs.readlink(l.ino).unwrap(), b"db/t.ibd");
    fs.rmdir(ROOT, "db").unwrap();
    let names: Vec<String> = fs.readdir(ROOT).unwrap().into_iter().map(|e| e.2).collect();
    assert_eq!(names, ["hard", "l", "moved"]);
}

#[test]
fn truncate_holes_fallocate_and_space() {
    let d = dev("mem,capacity=8MiB");
    let mut fs = Fs::format(d, FsOptions::default()).unwrap();
    let f = fs
        .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    fs.write(f.ino, 0, &[7u8; 10_000]).unwrap();
    let shrink = SetAttr {
        size: Some(5000),
        ..SetAttr::default()
    };
    fs.setattr(f.ino, &shrink).unwrap();
    let grow = SetAttr {
        size: Some(12_000),
        ..SetAttr::default()
    };
    fs.setattr(f.ino, &grow).unwrap();
    let r = fs.read(f.ino, 0, 12_000).unwrap();
    assert_eq!(&r[..5000], &[7u8; 5000][..]);
    assert!(
        r[5000..].iter().all(|&b| b == 0),
        "bytes past a truncation read as zeros"
    );
    fs.fallocate(f.ino, 0, 1 << 20, 0).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().size, 1 << 20);
    assert!(fs
        .read(f.ino, 12_000, 4096)
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    fs.fallocate(
        f.ino,
        0,
        8192,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    )
    .unwrap();
    assert!(fs.read(f.ino, 0, 8192).unwrap().iter().all(|&b| b == 0));
    // Fill the device: a typed error, and the file stays readable.
    let free = fs.statfs().free;
    let g = fs
        .create(ROOT, "g", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    let big = vec![1u8; ((free + 10) * 4096) as usize];
    assert!(matches!(fs.write(g.ino, 0, &big), Err(FsError::NoSpace)));
    assert_eq!(fs.statfs().free, free, "a failed write keeps no blocks");
    assert!(matches!(
        fs.write(g.ino, u64::MAX - 10, b"x"),
        Err(FsError::TooLarge { .. })
    ));
}

#[test]
fn too_small_and_unformatted_devices_are_typed_errors() {
    let d = dev("mem,capacity=256KiB");
    assert!(matches!(
        Fs::format(d.clone(), FsOptions::default()),
        Err(FsError::TooSmall { .. })
    ));
    assert!(matches!(
        Fs::open(d, FsOptions::default()),
        Err(FsError::NotFormatted)
    ));
}

#[test]
fn stream_rules_tag_the_double_write_range() {
    let d = dev("sata-ssd,capacity=64MiB,streams=2,op=0.25");
    let rules = StreamRules::parse(&["dwb=ibdata1:1MiB-3MiB"]).unwrap();
    let mut fs = Fs::format(d.clone(), FsOptions { rules }).unwrap();
    d.reset_stats();
    let f = fs
        .create(ROOT, "ibdata1", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    // 4 MiB in 16 KiB pages: 2 MiB of them inside the double-write range.
    for page in 0..256u64 {
        fs.write(f.ino, page * 16384, &[page as u8; 16384]).unwrap();
    }
    fs.fsync(f.ino).unwrap();
    let s = d.stats();
    assert_eq!(s.streams[1].host_write_pages, 512, "{s:?}");
    assert!(s.streams[0].host_write_pages >= 512);
    assert!(s.flushes >= 2);
}

#[test]
fn bytes_past_the_committed_size_do_not_reappear_after_a_cut() {
    let d = dev("mem,capacity=8MiB");
    let mut fs = Fs::format(d.clone(), FsOptions::default()).unwrap();
    let f = fs
        .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    fs.write(f.ino, 0, &[1u8; 5000]).unwrap();
    fs.fsync(f.ino).unwrap();
    // Past the committed size, in the same block; durable on the device, never committed.
    fs.write(f.ino, 5000, &[2u8; 3000]).unwrap();
    d.flush().unwrap();
    fs.power_cut(1, "test").unwrap();
    let mut fs = Fs::open(d, FsOptions::default()).unwrap();
    assert_eq!(fs.getattr(f.ino).unwrap().size, 5000);
    let grow = SetAttr {
        size: Some(8192),
        ..SetAttr::default()
    };
    fs.setattr(f.ino, &grow).unwrap();
    let r = fs.read(f.ino, 0, 8192).unwrap();
    assert_eq!(&r[..5000], &[1u8; 5000][..]);
    assert!(r[5000..].iter().all(|&b| b == 0));
}
