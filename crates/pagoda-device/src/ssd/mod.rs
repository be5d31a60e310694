//! Emulated flash SSD: NAND geometry, page-mapping FTL, GC, streams, atomic writes, power cut + SPOR.
