//! Response bytes rewritten as they stream: each real value replaced by
//! its placeholder (the same length), values cut across pieces included.
//! The pairs to replace, encoded forms and all, come from `declared` and
//! `echoes`.

/// Replaces each real value with its placeholder (the same length) in a
/// stream of bytes cut anywhere: it holds back the last bytes of each piece
/// that could start a value the next piece ends.
pub struct Scrubber {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    held: Vec<u8>,
}

impl Scrubber {
    /// A scrubber of these `(real, placeholder)` pairs (equal lengths).
    pub fn new(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Scrubber {
        let pairs = pairs
            .into_iter()
            .filter(|(r, p)| !r.is_empty() && r.len() == p.len())
            .collect();
        Scrubber {
            pairs,
            held: Vec::new(),
        }
    }

    /// Whether it has nothing to replace.
    pub fn is_idle(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `piece` scrubbed, less what is held back for the next piece.
    pub fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        if self.pairs.is_empty() {
            return piece.to_vec();
        }
        self.held.extend_from_slice(piece);
        self.replace_all();
        // Held back: the longest end that could begin a value the next
        // piece ends (a stream of events passes at once otherwise).
        let keep = self
            .pairs
            .iter()
            .filter_map(|(real, _)| {
                (1..real.len().min(self.held.len() + 1))
                    .rev()
                    .find(|&k| self.held.ends_with(&real[..k]))
            })
            .max()
            .unwrap_or(0);
        let rest = self.held.split_off(self.held.len() - keep);
        std::mem::replace(&mut self.held, rest)
    }

    /// What is still held, scrubbed (at the end of the stream).
    pub fn finish(&mut self) -> Vec<u8> {
        self.replace_all();
        std::mem::take(&mut self.held)
    }

    fn replace_all(&mut self) {
        for (real, placeholder) in &self.pairs {
            let mut from = 0;
            while let Some(at) = memchr::memmem::find(&self.held[from..], real) {
                let at = from + at;
                self.held[at..at + real.len()].copy_from_slice(placeholder);
                from = at + real.len();
            }
        }
    }
}
