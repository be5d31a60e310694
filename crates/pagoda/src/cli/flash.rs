//! The flash cache flags (FaCE) as one group that `pagoda bench` and the crash tester both
//! flatten: one definition, one spelling, and clap refuses a size, policy or pages flag given
//! without `--flash-cache`. What each command does with them (its defaults, which devices it
//! accepts) stays with the command.

use super::error::{CliError, CliResult};
use super::units::Size;
use clap::Args;
use pagoda_engine::{FlashPages, FlashPolicy};

/// The flash cache between the buffer pool and the data device.
#[derive(Clone, Debug, Default, Args)]
#[command(next_help_heading = "Flash cache (FaCE)")]
pub struct FlashCacheFlags {
    /// Put a flash cache between the DRAM buffer and the data device, on this device: any
    /// device the data device takes (the crash tester: one it can cut power on). Needs
    /// --torn none or atomic. Only file:PATH keeps the cache warm between --load-only and
    /// --run-only.
    #[arg(id = "flash_cache", long = "flash-cache", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Bytes of the cache device the cache uses, metadata included; also the device's capacity
    /// when its string names none (default: `bench` uses the whole device, the crash tester 4
    /// times the buffer pool and room for 5 cleaner batches, so that its ring wraps).
    #[arg(
        long = "flash-cache-size",
        value_name = "SIZE",
        requires = "flash_cache"
    )]
    pub size: Option<Size>,
    /// Replacement policy: face | face-gsc | lru [default: face].
    #[arg(
        long = "flash-cache-policy",
        value_name = "POLICY",
        requires = "flash_cache"
    )]
    pub policy: Option<FlashPolicy>,
    /// Pages the cache takes from DRAM: dirty | all [default: dirty, the FaCE paper's
    /// "dirty only"].
    #[arg(
        long = "flash-cache-pages",
        value_name = "PAGES",
        requires = "flash_cache"
    )]
    pub pages: Option<FlashPages>,
}

impl FlashCacheFlags {
    /// Whether any of the flags was given.
    pub fn given(&self) -> bool {
        self.device.is_some()
            || self.size.is_some()
            || self.policy.is_some()
            || self.pages.is_some()
    }

    /// The size in bytes, if given; a cache of 0 bytes is refused.
    pub fn size_bytes(&self) -> CliResult<Option<u64>> {
        match &self.size {
            Some(s) if s.bytes() == 0 => Err(CliError::Usage(
                "--flash-cache-size 0: give the cache some room, e.g. --flash-cache-size 512MiB"
                    .to_string(),
            )),
            s => Ok(s.as_ref().map(Size::bytes)),
        }
    }

    /// The policy, default FaCE.
    pub fn policy(&self) -> FlashPolicy {
        self.policy.unwrap_or_default()
    }

    /// Which pages the cache keeps, default dirty only.
    pub fn pages(&self) -> FlashPages {
        self.pages.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        flash: FlashCacheFlags,
    }

    /// A size, policy or pages flag without a device is refused by clap, naming the flag
    /// that is missing; with one, the group reads as given.
    #[test]
    fn the_cache_flags_need_a_device() {
        for flag in [
            ["--flash-cache-size", "8MiB"],
            ["--flash-cache-policy", "lru"],
            ["--flash-cache-pages", "all"],
        ] {
            let e = Cmd::try_parse_from(["x", flag[0], flag[1]])
                .err()
                .expect("refused");
            assert!(e.to_string().contains("--flash-cache <DEVICE>"), "{e}");
        }
        let c = Cmd::try_parse_from(["x", "--flash-cache", "mem", "--flash-cache-size", "8MiB"])
            .expect("parses");
        assert!(c.flash.given());
        assert_eq!(c.flash.size_bytes().unwrap(), Some(8 << 20));
        assert_eq!(c.flash.policy(), FlashPolicy::default());
        let zero = Cmd::try_parse_from(["x", "--flash-cache", "mem", "--flash-cache-size", "0"])
            .expect("parses");
        assert!(zero.flash.size_bytes().is_err());
        assert!(!Cmd::try_parse_from(["x"]).unwrap().flash.given());
    }
}
