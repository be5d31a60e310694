//! A record as one value: encoding and decoding its fields, and generating printable field
//! values of the configured lengths.

use rand::rngs::SmallRng;
use rand::Rng;

use super::config::{FieldLengthDistribution, YcsbConfig};
use crate::dist::Zipfian;
use crate::store::StoreError;

/// Encodes a record's fields into one value (format in the [`ycsb`](super) module docs).
pub fn encode_record(fields: &[Vec<u8>]) -> Vec<u8> {
    if let [only] = fields {
        return only.clone();
    }
    let mut v = Vec::with_capacity(fields.iter().map(|f| f.len() + 4).sum());
    for f in fields {
        v.extend_from_slice(&(f.len() as u32).to_le_bytes());
        v.extend_from_slice(f);
    }
    v
}

/// Decodes a value written by [`encode_record`] with `field_count` fields.
pub fn decode_record(value: &[u8], field_count: usize) -> Result<Vec<Vec<u8>>, StoreError> {
    if field_count == 1 {
        return Ok(vec![value.to_vec()]);
    }
    let bad = || StoreError::Other("corrupt YCSB record: field lengths overrun the value".into());
    let mut fields = Vec::with_capacity(field_count);
    let mut rest = value;
    while !rest.is_empty() {
        let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
        let len = u32::from_le_bytes(*len) as usize;
        if tail.len() < len {
            return Err(bad());
        }
        fields.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    if fields.len() != field_count {
        return Err(StoreError::Other(format!(
            "YCSB record has {} fields, expected {field_count}; reload with the same --field-count",
            fields.len()
        )));
    }
    Ok(fields)
}

/// Fills `len` printable ASCII bytes (`!`..`~`): random bytes scaled into the 94 printable
/// ones by a multiply and shift (a division per byte made value generation a tenth of a
/// benchmark client's CPU).
fn printable(rng: &mut SmallRng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    for b in &mut v {
        *b = b'!' + ((u16::from(*b) * 94) >> 8) as u8;
    }
    v
}

/// Draws field lengths.
#[derive(Debug, Clone)]
pub(super) struct FieldLengths {
    dist: FieldLengthDistribution,
    max: usize,
    zipf: Option<Zipfian>,
}

impl FieldLengths {
    pub(super) fn new(cfg: &YcsbConfig) -> Self {
        let zipf = (cfg.field_length_distribution == FieldLengthDistribution::Zipfian)
            .then(|| Zipfian::new(cfg.field_length as u64, crate::dist::ZIPFIAN_CONSTANT));
        FieldLengths {
            dist: cfg.field_length_distribution,
            max: cfg.field_length,
            zipf,
        }
    }

    fn sample(&self, rng: &mut SmallRng) -> usize {
        match (&self.dist, &self.zipf) {
            (FieldLengthDistribution::Uniform, _) => rng.gen_range(1..=self.max),
            (FieldLengthDistribution::Zipfian, Some(z)) => z.sample(rng) as usize + 1,
            _ => self.max,
        }
    }

    pub(super) fn field(&self, rng: &mut SmallRng) -> Vec<u8> {
        let len = self.sample(rng);
        printable(rng, len)
    }

    pub(super) fn record(&self, rng: &mut SmallRng, count: usize) -> Vec<Vec<u8>> {
        (0..count).map(|_| self.field(rng)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn values_are_printable_and_spread_over_all_94_characters() {
        let mut rng = SmallRng::seed_from_u64(7);
        let v = printable(&mut rng, 20_000);
        assert_eq!(v.len(), 20_000);
        assert!(v.iter().all(|b| (b'!'..=b'~').contains(b)));
        let mut seen = [0u32; 256];
        for &b in &v {
            seen[b as usize] += 1;
        }
        let used = seen.iter().filter(|&&n| n > 0).count();
        assert_eq!(used, 94, "characters used");
        let (lo, hi) = seen[33..=126]
            .iter()
            .fold((u32::MAX, 0), |(l, h), &n| (l.min(n), h.max(n)));
        assert!(hi < 2 * lo, "uneven: {lo}..{hi} per character");
    }

    #[test]
    fn record_encoding_round_trips_and_rejects_garbage() {
        let fields = vec![b"abc".to_vec(), Vec::new(), b"z".to_vec()];
        let v = encode_record(&fields);
        assert_eq!(decode_record(&v, 3).unwrap(), fields);
        assert!(decode_record(&v, 2).is_err());
        assert!(decode_record(&v[..v.len() - 1], 3).is_err());
        assert_eq!(encode_record(&[b"raw".to_vec()]), b"raw");
    }
}
