//! fallocate's errors, as the FUSE mount hands them to the kernel (`FsError::errno`): a range
//! past the largest file is EFBIG, as a write there is, and changes nothing; only a mode the
//! file system does not provide is EOPNOTSUPP (posix_fallocate then writes zeros itself).
//! The exerciser (`exerciser.rs`) found the first one answered with EOPNOTSUPP.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_fs::{Fs, FsOptions, Kind, ROOT};

#[test]
fn fallocate_past_the_largest_file_is_efbig_and_an_unknown_mode_eopnotsupp() {
    let dev = DeviceSpec::parse("mem,capacity=16MiB")
        .unwrap()
        .open()
        .unwrap();
    let mut fs = Fs::format(dev, FsOptions::default()).unwrap();
    let f = fs
        .create(ROOT, "f", Kind::File, 0o644, (0, 0), b"")
        .unwrap();
    fs.write(f.ino, 0, &[5u8; 10_000]).unwrap();
    let max = 16u64 << 20;
    let write = fs.write(f.ino, max - 100, &[1u8; 200]).unwrap_err();
    assert_eq!(write.errno(), libc::EFBIG, "{write}");
    for mode in [0, libc::FALLOC_FL_KEEP_SIZE] {
        let e = fs.fallocate(f.ino, max - 100, 200, mode).unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG, "mode {mode:#x}: {e}");
    }
    let before = fs.statfs().free;
    let e = fs
        .fallocate(f.ino, 0, 4096, libc::FALLOC_FL_ZERO_RANGE)
        .unwrap_err();
    assert_eq!(e.errno(), libc::EOPNOTSUPP, "{e}");
    assert_eq!(
        fs.fallocate(f.ino, 0, 0, 0).unwrap_err().errno(),
        libc::EINVAL
    );
    // Nothing changed, and the file system is up.
    assert_eq!(fs.statfs().free, before);
    assert_eq!(fs.getattr(f.ino).unwrap().size, 10_000);
    assert_eq!(fs.read(f.ino, 0, 20_000).unwrap(), vec![5u8; 10_000]);
    fs.fallocate(f.ino, max - 4096, 4096, libc::FALLOC_FL_KEEP_SIZE)
        .unwrap();
    fs.fsync(f.ino).unwrap();
}
