//! The FUSE session: checks that FUSE can work here, mounts, waits for signals or an external
//! `umount`, and unmounts.

use crate::error::{CliError, CliResult};
use pagoda_fs::fuse::{PagodaFuse, StatsFn};
use pagoda_fs::Fs;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One clear line when FUSE cannot work on this machine.
pub(super) fn check_fuse() -> CliResult<()> {
    let dev = Path::new("/dev/fuse");
    if !dev.exists() {
        return Err(CliError::Other(
            "FUSE is unavailable: /dev/fuse does not exist (load the module with `modprobe \
             fuse`; in a container, pass the device, e.g. docker run --device /dev/fuse \
             --cap-add SYS_ADMIN)"
                .into(),
        ));
    }
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open(dev) {
        return Err(CliError::Other(format!(
            "FUSE is unavailable: cannot open /dev/fuse ({e}); run as root or give this user \
             access to /dev/fuse"
        )));
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let fusermount = ["fusermount3", "fusermount"].iter().any(|b| on_path(b));
    if !root && !fusermount {
        return Err(CliError::Other(
            "FUSE mount needs root, or fusermount3 for a normal user (apt-get install fuse3)"
                .into(),
        ));
    }
    Ok(())
}

fn on_path(bin: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(bin).is_file()))
}

fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Mounts and serves until SIGINT/SIGTERM/SIGHUP or an external unmount; SIGUSR1 prints the
/// counters. Returns once the file system is unmounted.
pub(super) fn serve(
    mountpoint: &Path,
    fs: Arc<Mutex<Fs>>,
    stats: StatsFn,
    seed: u64,
    threads: usize,
) -> CliResult<()> {
    let set = sigset(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1]);
    // Blocked here before fuser starts its thread, so every signal waits for sigtimedwait
    // below instead of killing the process with the file system mounted.
    // SAFETY: `set` is initialised; the old mask is not wanted.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let options = [
        fuser::MountOption::FSName("pagoda".into()),
        fuser::MountOption::Subtype("pagoda".into()),
        fuser::MountOption::AllowOther,
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::RW,
    ];
    let session = fuser::spawn_mount2(
        PagodaFuse::new(fs.clone(), stats.clone(), seed).with_threads(threads),
        mountpoint,
        &options,
    )
    .map_err(|e| {
        CliError::Other(format!(
            "FUSE mount on {} failed: {e} (mounting needs root, or fusermount3 from the fuse3 \
             package)",
            mountpoint.display()
        ))
    })?;
    eprintln!(
        "pagoda mount: mounted {}; counters: kill -USR1 {} or cat {}/.pagoda/stats; stop: \
         Ctrl-C, kill {} or umount",
        mountpoint.display(),
        std::process::id(),
        mountpoint.display(),
        std::process::id()
    );
    let wait = libc::timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    let external = loop {
        if session.guard.is_finished() {
            break true;
        }
        // SAFETY: `set` and `wait` are initialised; no siginfo wanted.
        let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &wait) };
        match sig {
            libc::SIGUSR1 => {
                let text = {
                    let fs = fs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    stats(&fs, false)
                };
                println!("{text}");
            }
            libc::SIGINT | libc::SIGTERM | libc::SIGHUP => break false,
            _ => {}
        }
    };
    if !external {
        unmount(mountpoint);
    }
    // The session thread ends when the kernel closes the connection.
    let t0 = Instant::now();
    while !session.guard.is_finished() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(session);
    eprintln!("pagoda mount: unmounted {}", mountpoint.display());
    Ok(())
}

fn unmount(mountpoint: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(mountpoint.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: `c` is a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return;
    }
    let e = std::io::Error::last_os_error();
    eprintln!(
        "pagoda mount: umount {}: {e}; detaching it (files still open there will fail)",
        mountpoint.display()
    );
    // SAFETY: as above.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
}
