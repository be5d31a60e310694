//! Byte counts written for people (`4 KiB`, `1.50 GiB`): a leaf module, so that both the
//! error messages and `units` (whose parsers return those errors) can use it.

/// Formats a byte count with a binary unit, for tables and messages.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}
