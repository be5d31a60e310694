#![allow(clippy::unwrap_used)]
//! The crash test with a flash cache (seed 000): the options it refuses. (The power-cut runs
//! over every policy and the flash sabotages follow once the engine's flash cache lands.)

use pagoda_crashtest::{run, CrashFlashCache, CrashTestOptions, FlashPages, FlashPolicy};
use pagoda_engine::{CommitMode, Sabotage, TornMode};

fn options(policy: FlashPolicy, pages: FlashPages, commit: CommitMode) -> CrashTestOptions {
    CrashTestOptions {
        commit,
        page_size: 4096,
        ..CrashTestOptions::default()
    }
    .flash_cache(CrashFlashCache::new(policy, pages))
}

#[test]
fn flash_bad_options_are_refused() {
    let bad = |o: CrashTestOptions| run(o).unwrap_err().to_string();
    // A flash sabotage needs a flash cache.
    assert!(bad(CrashTestOptions {
        torn: TornMode::None,
        sabotage: Some(Sabotage::FlashTrustTornSlots),
        ..Default::default()
    })
    .contains("--flash-cache"));
    // The engine refuses the double-write buffer beside a flash cache; the harness passes its
    // reason on.
    let e = bad(CrashTestOptions {
        torn: TornMode::Doublewrite,
        ..options(FlashPolicy::Face, FlashPages::Dirty, CommitMode::Sync)
    });
    assert!(e.contains("--torn none"), "{e}");
    assert!(bad(
        options(FlashPolicy::Lru, FlashPages::All, CommitMode::Sync).flash_cache(CrashFlashCache {
            size_bytes: Some(0),
            ..CrashFlashCache::default()
        })
    )
    .contains("size above 0"));
    // The default torn mode with a flash cache is none.
    assert_eq!(
        options(FlashPolicy::Face, FlashPages::Dirty, CommitMode::Sync).torn,
        TornMode::None
    );
}
