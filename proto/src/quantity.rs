//! Kubernetes resource quantities, as far as the hub and agent need them: parse (`4`, `500m`,
//! `8Gi`, `1.5G`, `2e3`), add, compare and print back in a canonical form (the agent sums Node
//! capacities; placement ranks clusters by allocatable CPU and memory).

/// A quantity in thousandths of its unit (millis), exact for every suffix down to `m`; finer
/// values (`n`, `u`) are rounded up to the next milli, as Kubernetes rounds for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quantity {
    milli: i128,
    /// Whether it was written with a binary suffix (Ki, Mi, ...), to print it back that way.
    binary: bool,
}

impl Quantity {
    /// Parses a quantity; `None` when it is not one.
    pub fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(split);
        if number.is_empty() {
            return None;
        }
        let (binary, scale_num, scale_den): (bool, i128, i128) = match suffix {
            "" => (false, 1000, 1),
            "n" => (false, 1, 1_000_000),
            "u" => (false, 1, 1000),
            "m" => (false, 1, 1),
            "k" => (false, 1_000_000, 1),
            "M" => (false, 1_000_000_000, 1),
            "G" => (false, 1_000_000_000_000, 1),
            "T" => (false, 1_000_000_000_000_000, 1),
            "P" => (false, 1_000_000_000_000_000_000, 1),
            "E" => (false, 1_000_000_000_000_000_000_000, 1),
            "Ki" => (true, 1000 << 10, 1),
            "Mi" => (true, 1000 << 20, 1),
            "Gi" => (true, 1000 << 30, 1),
            "Ti" => (true, 1000 << 40, 1),
            "Pi" => (true, 1000 << 50, 1),
            "Ei" => (true, 1000 << 60, 1),
            s if s.starts_with(['e', 'E']) => {
                let exp: u32 = s[1..].parse().ok().filter(|e| *e <= 18)?;
                (false, 1000 * 10i128.pow(exp), 1)
            }
            _ => return None,
        };
        let negative = number.starts_with('-');
        let digits = number.strip_prefix(['+', '-']).unwrap_or(number);
        let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() && frac.is_empty()
            || frac.len() > 18
            || !whole.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let whole: i128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
        let frac_value: i128 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
        let frac_den = 10i128.pow(u32::try_from(frac.len()).ok()?);
        // value * scale, in millis, rounded up.
        let num = (whole.checked_mul(frac_den)?.checked_add(frac_value)?).checked_mul(scale_num)?;
        let den = frac_den.checked_mul(scale_den)?;
        let mut milli = num / den + i128::from(num % den != 0);
        if negative {
            milli = -milli;
        }
        Some(Quantity { milli, binary })
    }

    /// The value in thousandths of its unit (`500m` → 500, `1Ki` → 1,024,000).
    pub fn milli(&self) -> i128 {
        self.milli
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;

    /// The sum of two quantities (binary if either was).
    fn add(self, other: Quantity) -> Quantity {
        Quantity {
            milli: self.milli.saturating_add(other.milli),
            binary: self.binary || other.binary,
        }
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.milli % 1000 != 0 {
            return write!(f, "{}m", self.milli);
        }
        let units = self.milli / 1000;
        if self.binary && units != 0 {
            for (suffix, shift) in
                [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)]
            {
                if units % (1i128 << shift) == 0 {
                    return write!(f, "{}{suffix}", units >> shift);
                }
            }
        }
        write!(f, "{units}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s}"))
    }

    #[test]
    fn parses_sums_and_prints() {
        assert_eq!((q("4") + q("500m")).to_string(), "4500m");
        assert_eq!((q("2") + q("2")).to_string(), "4");
        assert_eq!((q("8Gi") + q("8Gi")).to_string(), "16Gi");
        assert_eq!((q("1Gi") + q("512Mi")).to_string(), "1536Mi");
        assert_eq!(q("1.5").to_string(), "1500m");
        assert_eq!(q("2e3").to_string(), "2000");
        assert_eq!(q("1k").to_string(), "1000");
        assert_eq!(q("100n").to_string(), "1m", "rounded up");
        assert_eq!((q("110") + q("110")).to_string(), "220");
        for bad in ["", "Gi", "1X", "1.2.3", "e3", "1e99", "1.-5", "+-1"] {
            assert!(Quantity::parse(bad).is_none(), "{bad}");
        }
    }
}
