//! kube's score normalizations.

use super::interface::MAX_NODE_SCORE;

/// kube's `DefaultNormalizeScore`: scale so the highest is `MAX_NODE_SCORE`;
/// `reverse` turns high raw scores into low ones (e.g. counts of untolerated
/// soft taints). All zero stays zero, or all `MAX_NODE_SCORE` when reversed.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for score in scores.iter_mut() {
        *score = MAX_NODE_SCORE * *score / max;
        if reverse {
            *score = MAX_NODE_SCORE - *score;
        }
    }
}

/// Maps scores linearly from [min, max] onto [0, MAX_NODE_SCORE] (all equal: 0).
pub fn min_max_normalize(scores: &mut [i64]) {
    let (Some(min), Some(max)) = (scores.iter().copied().min(), scores.iter().copied().max())
    else {
        return;
    };
    let span = max - min;
    for score in scores.iter_mut() {
        *score = if span > 0 {
            MAX_NODE_SCORE * (*score - min) / span
        } else {
            0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_normalize_table() {
        let cases: [(&[i64], bool, &[i64]); 5] = [
            (&[1, 2, 3, 4, 5], false, &[20, 40, 60, 80, 100]),
            (&[1, 2, 3, 4, 5], true, &[80, 60, 40, 20, 0]),
            (&[0, 0, 0], false, &[0, 0, 0]),
            (&[0, 0, 0], true, &[100, 100, 100]),
            (&[1000, 10, 20, 30], false, &[100, 1, 2, 3]),
        ];
        for (input, reverse, want) in cases {
            let mut scores = input.to_vec();
            default_normalize(&mut scores, reverse);
            assert_eq!(scores, want, "{input:?} reverse={reverse}");
        }
    }

    #[test]
    fn min_max_table() {
        let mut scores = vec![-10, 0, 10];
        min_max_normalize(&mut scores);
        assert_eq!(scores, vec![0, 50, 100]);
        let mut flat = vec![5, 5];
        min_max_normalize(&mut flat);
        assert_eq!(flat, vec![0, 0]);
    }
}
