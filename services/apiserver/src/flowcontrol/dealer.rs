//! Shuffle sharding: a flow's hash deals it a hand of distinct queues
//! out of the deck, so two flows rarely share their whole hand and a
//! heavy flow crowds out few others.

use thiserror::Error;

/// Hash bits a hand may consume; a 64-bit hash spread thinner would deal
/// hands that repeat.
const MAX_ENTROPY_BITS: u32 = 60;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DealerError {
    #[error("deckSize {0} and handSize {1} must be positive, with handSize at most deckSize")]
    Sizes(u32, u32),
    #[error(
        "handSize {hand} with deckSize {deck} needs more than {MAX_ENTROPY_BITS} bits of entropy"
    )]
    Entropy { deck: u32, hand: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dealer {
    deck: u32,
    hand: u32,
}

impl Dealer {
    pub fn new(deck: u32, hand: u32) -> Result<Dealer, DealerError> {
        if deck == 0 || hand == 0 || hand > deck {
            return Err(DealerError::Sizes(deck, hand));
        }
        let bits = ((deck as f64).log2() * hand as f64).ceil();
        if bits > MAX_ENTROPY_BITS as f64 {
            return Err(DealerError::Entropy { deck, hand });
        }
        Ok(Dealer { deck, hand })
    }

    pub fn hand_size(&self) -> u32 {
        self.hand
    }

    /// The hand for `hash`, in the order dealt.
    pub fn deal(&self, mut hash: u64) -> Vec<u32> {
        let mut dealt = Vec::with_capacity(self.hand as usize);
        // Ascending copy of `dealt`, to turn each draw into a card not yet
        // dealt.
        let mut taken: Vec<u32> = Vec::with_capacity(self.hand as usize);
        for remaining in (self.deck - self.hand + 1..=self.deck).rev() {
            // A draw among the cards still in the deck...
            let mut card = (hash % remaining as u64) as u32;
            hash /= remaining as u64;
            // ...named by its place in the full deck.
            let mut at = 0;
            while at < taken.len() && taken[at] <= card {
                card += 1;
                at += 1;
            }
            taken.insert(at, card);
            dealt.push(card);
        }
        dealt
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn hands_are_distinct_cards_within_the_deck() {
        let dealer = Dealer::new(64, 8).unwrap();
        for hash in (0..5000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) {
            let hand = dealer.deal(hash);
            assert_eq!(hand.len(), 8);
            assert!(hand.iter().all(|c| *c < 64));
            assert_eq!(hand.iter().collect::<HashSet<_>>().len(), 8, "{hand:?}");
        }
    }

    #[test]
    fn every_card_is_dealt_about_as_often() {
        let dealer = Dealer::new(16, 4).unwrap();
        let mut counts = [0u32; 16];
        let draws = 40_000u64;
        for hash in (0..draws).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 7)) {
            for card in dealer.deal(hash) {
                counts[card as usize] += 1;
            }
        }
        let expected = (draws * 4 / 16) as f64;
        for count in counts {
            assert!(
                (count as f64 - expected).abs() < expected * 0.1,
                "{counts:?}"
            );
        }
    }

    #[test]
    fn the_whole_deck_is_a_permutation() {
        let dealer = Dealer::new(5, 5).unwrap();
        let mut hand = dealer.deal(12345);
        hand.sort();
        assert_eq!(hand, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn sizes_are_checked() {
        assert_eq!(Dealer::new(4, 5), Err(DealerError::Sizes(4, 5)));
        assert_eq!(Dealer::new(0, 0), Err(DealerError::Sizes(0, 0)));
        // 15 bits a card, 4 cards: 60 bits.
        assert_eq!(Dealer::new(1 << 15, 4).unwrap().hand_size(), 4);
        assert_eq!(
            Dealer::new(1 << 16, 4),
            Err(DealerError::Entropy {
                deck: 1 << 16,
                hand: 4
            })
        );
        assert!(Dealer::new(128, 6).is_ok());
    }
}
