//! How capacity is laid out: one block size at every capacity the reproductions use, so a
//! larger device has more blocks per parallel unit and nothing else changes (issue 25, item 5).

use pagoda_device::ssd::layout::{MIN_PAGES_PER_BLOCK, REFERENCE_CAPACITY};
use pagoda_device::ssd::{Geometry, Ssd, SsdConfig};
use pagoda_device::DeviceError;

fn geometry(preset: &str, opts: &[(&str, &str)]) -> Result<Geometry, DeviceError> {
    let mut c = SsdConfig::preset(preset)?;
    for (k, v) in opts {
        c.set(k, v)?;
    }
    c.geometry()
}

fn at(preset: &str, capacity: &str) -> Geometry {
    geometry(preset, &[("capacity", capacity)]).expect("geometry")
}

#[test]
fn presets_keep_one_block_size_and_add_blocks_per_unit_with_capacity() {
    // (preset, the block it must lay out, in pages): the largest that keeps every write
    // point at 512 MiB (sata-ssd: 528 spare blocks needed, 35.8 MiB spare; nvme-ssd: 1040
    // needed, 143 MiB spare).
    for (preset, pages) in [("sata-ssd", 8), ("nvme-ssd", 8)] {
        let geos: Vec<Geometry> = ["512MiB", "1GiB", "8GiB"]
            .iter()
            .map(|c| at(preset, c))
            .collect();
        let drive = SsdConfig::preset(preset).expect("preset").pages_per_block;
        for g in &geos {
            assert_eq!(g.pages_per_block, pages, "{preset}: {g:?}");
            assert_eq!(g.drive_pages_per_block, drive, "{preset}: {g:?}");
            assert_eq!(g.stripe, g.pus, "{preset}: every write point kept");
            // Erase time per byte stays the drive's.
            assert_eq!(g.erase_fraction(), f64::from(pages) / f64::from(drive));
        }
        let per_unit: Vec<u32> = geos.iter().map(|g| g.blocks / g.pus).collect();
        assert!(
            per_unit[0] < per_unit[1] && per_unit[1] < per_unit[2],
            "{preset}: blocks per unit at 512 MiB, 1 GiB, 8 GiB: {per_unit:?}"
        );
        // Twice the capacity, twice the blocks (to within rounding to whole blocks).
        assert!(geos[1].blocks.abs_diff(2 * geos[0].blocks) <= 1, "{geos:?}");
        // The largest such block: twice as large no longer keeps the write points there.
        let twice = (2 * pages).to_string();
        let reference = REFERENCE_CAPACITY.to_string();
        let g = geometry(
            preset,
            &[("capacity", &reference), ("pages_per_block", &twice)],
        )
        .expect("halved to fit");
        assert_eq!(g.pages_per_block, pages, "{preset}: {g:?}");
    }
}

#[test]
fn an_explicit_pages_per_block_is_honoured_where_the_capacity_allows() {
    // The drive's 1 MiB block fits at 8 GiB and is used as given.
    let g = geometry(
        "sata-ssd",
        &[("capacity", "8GiB"), ("pages_per_block", "128")],
    )
    .expect("8 GiB");
    assert_eq!((g.pages_per_block, g.drive_pages_per_block), (128, 128));
    assert_eq!(g.erase_fraction(), 1.0);
    // Set before the capacity, too: the key, not its position, decides.
    let g = geometry(
        "sata-ssd",
        &[("pages_per_block", "128"), ("capacity", "8GiB")],
    )
    .expect("8 GiB");
    assert_eq!(g.pages_per_block, 128);
    // At 1 GiB it is halved until the spare blocks hold the write points (128 KiB).
    let g = geometry(
        "sata-ssd",
        &[("capacity", "1GiB"), ("pages_per_block", "128")],
    )
    .expect("1 GiB");
    assert_eq!((g.pages_per_block, g.drive_pages_per_block), (16, 128));
    // A block smaller than the preset's is used as given, at every capacity.
    for capacity in ["512MiB", "8GiB"] {
        let g = geometry(
            "sata-ssd",
            &[("capacity", capacity), ("pages_per_block", "4")],
        )
        .expect("4 pages");
        assert_eq!((g.pages_per_block, g.erase_fraction()), (4, 1.0));
    }
}

#[test]
fn a_device_below_the_reference_capacity_builds_with_halved_blocks() {
    let g = at("sata-ssd", "256MiB");
    assert_eq!((g.pages_per_block, g.stripe), (MIN_PAGES_PER_BLOCK, 64));
    let d = Ssd::from_preset("sata-ssd", &[("capacity", "256MiB"), ("backing", "none")])
        .expect("device");
    let text = pagoda_device::BlockDevice::describe(&d);
    assert!(
        text.contains("blocks of 32 KiB (4 pages; the drive's block is 1 MiB)"),
        "describe() names the block in use: {text}"
    );
    // Too small even for the smallest block: still the typed error.
    let e = geometry("sata-ssd", &[("capacity", "128MiB")]).expect_err("too small");
    assert!(matches!(e, DeviceError::CapacityTooSmall { .. }), "{e:?}");
}

#[test]
fn describe_names_the_block_in_use() {
    let d = Ssd::from_preset("nvme-ssd", &[("backing", "none")]).expect("device");
    let text = pagoda_device::BlockDevice::describe(&d);
    assert!(
        text.contains("blocks of 128 KiB (8 pages; the drive's block is 2 MiB)"),
        "{text}"
    );
}
