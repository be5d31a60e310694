//! An I/O error writing the backing image fails the request, and every later flush and write:
//! an fsync must never be acknowledged once the image may have lost data. The error comes from
//! the file-size limit (RLIMIT_FSIZE), which is per process: hence this test's own binary.

#![allow(clippy::unwrap_used)] // tests fail loudly on purpose

use pagoda_device::spec::DeviceSpec;
use pagoda_device::{BlockDevice, WriteHints};
use pagoda_fs::backing::ImageDevice;

fn set_fsize_limit(bytes: libc::rlim_t) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a limit we own.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &lim) }, 0);
}

#[test]
fn an_image_write_error_fails_the_write_and_every_later_flush() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("dev.img");
    let dev = DeviceSpec::parse("mem,capacity=16MiB")
        .unwrap()
        .open()
        .unwrap();
    let (d, _) = ImageDevice::open(&img, dev).unwrap();
    let sector = vec![5u8; 4096];
    d.write(1, &sector, WriteHints::NORMAL).unwrap();
    d.flush().unwrap();
    // Past the limit a write fails with EFBIG (instead of the signal, which is ignored).
    // SAFETY: ignoring SIGXFSZ installs no handler.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    set_fsize_limit(8 << 20);
    let beyond = d.write(3000, &sector, WriteHints::NORMAL);
    set_fsize_limit(libc::RLIM_INFINITY);
    let e = beyond.unwrap_err().to_string();
    assert!(e.contains("dev.img"), "names the image: {e}");
    let flush = d.flush().unwrap_err().to_string();
    assert!(
        flush.contains("out of step") && flush.contains("mount again"),
        "{flush}"
    );
    assert!(d.write(1, &sector, WriteHints::NORMAL).is_err());
    assert!(d.trim(1, 1).is_err());
    assert!(d.sync_image().is_err());
}
