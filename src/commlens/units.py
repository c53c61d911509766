"""Numbers as people write and read them: message sizes in campaign files (4096, "64Ki", "4Mi", "1k"),
and sizes, times, bandwidths, durations and changes in every table, message and report. One place, so
that a size reads "64 KiB", a time "0.3531" us and a change "12% slower" wherever commlens prints one."""

import math
import re

# Binary, as OSU, IMB and NetPIPE label message sizes ("4M" is 4194304 B); Ki, Mi and Gi say the same.
_MULTIPLIERS = {"": 1, "k": 2**10, "K": 2**10, "M": 2**20, "G": 2**30, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_SIZE = re.compile(r"\A\s*(\d+)\s*(Ki|Mi|Gi|k|K|M|G)?\s*\Z")


def parse_size(value) -> int:
    """Bytes from an int or a string with an optional k (K), M, G or Ki, Mi, Gi suffix, each a power of 1024."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must be >= 0, got {value}")
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (bytes, optionally with k, M, G, Ki, Mi or Gi: powers of 1024)")
    number, suffix = match.groups()
    return int(number) * _MULTIPLIERS[suffix or ""]


def format_size(size) -> str:
    """Bytes as people read them: '8 B', '4 KiB', '1.5 MiB' (binary units, one decimal at most)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{value:.1f}".removesuffix(".0") + f" {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_size_range(low, high) -> str:
    """'4 KiB' or '4 KiB–64 KiB'."""
    return format_size(low) if low == high else f"{format_size(low)}–{format_size(high)}"


# An interval whose ends lie further apart than this factor says nothing as a number: it is said in words.
MEANINGLESS_WIDTH = 10.0


def format_factor(ratio: float) -> str:
    """A ratio of times (candidate / baseline) as a factor either way, alike in both directions:
    '2.1x slower' (ratio 2.1), '1.9x faster' (ratio 0.53); never a percentage, which is bounded at 100%
    one way (79% faster is 4.8x) and not the other."""
    if ratio >= 1:
        return f"{format_number(ratio, 3)}x slower"
    return f"{format_number(1 / ratio, 3)}x faster"


def format_change(ratio: float, low: float, high: float) -> str:
    """A ratio of times and its interval: '2.1x slower [time ratio 1.9-2.3]'; the interval in words where
    it spans more than MEANINGLESS_WIDTH, the change alone where there is none."""
    text = format_factor(ratio)
    if low != low or high != high:      # no interval (nothing measured the spread): the change alone
        return text
    if not (low > 0 and high / low <= MEANINGLESS_WIDTH):
        return f"{text} (its interval spans more than a factor of {MEANINGLESS_WIDTH:g}: too few launches to say)"
    return f"{text} [time ratio {format_number(low, 3)}-{format_number(high, 3)}]"


def format_seconds(seconds) -> str:
    """A measured time with its unit: '3.2 ms', '850 ns'; '' for a missing or infinite one."""
    if seconds is None or seconds != seconds or abs(seconds) == float("inf"):
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """How long something took or will take, as a person reads it: '0.4 s', '14 s', '6 min', '2.5 h'."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# Tables and the report print times in microseconds and bandwidths in MB/s (1e6 B/s), as OSU and
# the reports do, every value with the same number of significant figures and never in exponent
# notation: "10680" beside "1590", not "1.068e+04".
US = 1e-6
MB = 1e6
SIGNIFICANT = 4


def format_number(value, digits: int = SIGNIFICANT) -> str:
    """`digits` significant figures, whole numbers from 1000 up, no exponent: '0.3531', '12.47',
    '1590', '10680'; '' for a missing or infinite value."""
    if value is None or value != value or abs(value) == float("inf"):
        return ""
    value = float(value)
    if abs(value) >= 10 ** (digits - 1):
        return f"{value:.0f}"
    if value == 0:
        return "0"
    decimals = max(digits - 1 - math.floor(math.log10(abs(value))), 0)
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_us(seconds, digits: int = SIGNIFICANT) -> str:
    """A time in seconds as microseconds, the number alone (the column says 'us')."""
    return "" if seconds is None else format_number(float(seconds) / US, digits)


def format_mbps(bytes_per_s, digits: int = SIGNIFICANT) -> str:
    """A bandwidth in B/s as MB/s (1e6 B/s), the number alone."""
    return "" if bytes_per_s is None else format_number(float(bytes_per_s) / MB, digits)


def format_probability(p) -> str:
    """A p or q value: three significant figures, in scientific notation below 1e-3 ('5.41e-14', not
    '0.00000000000005414'); '' for a missing one."""
    if p is None or p != p:
        return ""
    p = float(p)
    return f"{p:.2e}" if 0 < p < 1e-3 else format_number(p, 3)


def format_interval(value: str, low: str, high: str) -> str:
    """'0.3531 [0.35, 0.36]' of already formatted numbers; the value alone where a bound is missing."""
    return f"{value} [{low}, {high}]" if value and low and high else value


def precision_digits(value: float, low: float, high: float) -> int:
    """Significant digits that show `value` as precisely as its interval allows: its last digit about a
    tenth of the interval's half-width (two digits of the uncertainty), at least 2 and at most SIGNIFICANT:
    '0.95 [0.62, 1.5]', not '0.9525 [0.6221, 1.458]'."""
    half = (high - low) / 2
    if not (math.isfinite(value) and math.isfinite(half) and half > 0 and value != 0):
        return SIGNIFICANT
    digits = math.floor(math.log10(abs(value))) - math.floor(math.log10(half)) + 2
    return min(max(digits, 2), SIGNIFICANT)


def format_significant(value: float, digits: int) -> str:
    """format_number, whole numbers rounded to `digits` significant figures too ('12900', not '12930',
    where three are all the interval allows)."""
    if value is None or value != value or abs(value) == float("inf") or value == 0:
        return format_number(value, digits)
    return format_number(round(float(value), digits - 1 - math.floor(math.log10(abs(float(value))))), digits)


def format_measured(value: float, low: float, high: float, fmt=format_significant) -> str:
    """'0.95 [0.62, 1.5]': a value and its interval at the digits the interval allows (precision_digits);
    `fmt(number, digits)` formats one number."""
    digits = precision_digits(value, low, high)
    return format_interval(fmt(value, digits), fmt(low, digits), fmt(high, digits))


def format_launch_interval(value: float, low: float, high: float, launches: int, per_launch,
                           fmt=format_significant, unit: str = "") -> str:
    """A statistic over launches with its interval, as a reader can use it: '0.35 [0.34, 0.36]'; from one
    launch, '0.35 [0.34, 0.36] within one launch' (launch-to-launch variation unmeasured); where the
    interval spans more than MEANINGLESS_WIDTH (two launches give t one degree of freedom), no interval
    but what the launches read: '0.35; too few launches for an interval: launches read 0.31-0.41'.
    `fmt(number, digits)` formats one number, at the digits the interval allows (precision_digits);
    `per_launch` holds each launch's value."""
    unit = f" {unit}" if unit else ""
    if not math.isfinite(value):
        return ""
    if launches <= 1:
        return format_measured(value, low, high, fmt) + f"{unit} within one launch"
    if not (math.isfinite(low) and math.isfinite(high) and low > 0 and high / low <= MEANINGLESS_WIDTH):
        read = [float(v) for v in per_launch if math.isfinite(float(v))]
        # What the launches read says how precise the value is: their spread stands for the interval.
        digits = precision_digits(value, min(read), max(read)) if len(read) > 1 else SIGNIFICANT
        return (f"{fmt(value, digits)}{unit}; too few launches for an interval: launches read "
                f"{fmt(min(read), digits)}-{fmt(max(read), digits)}" if read else fmt(value, digits) + unit)
    return format_measured(value, low, high, fmt) + unit


def format_exact_size(size) -> str:
    """format_size where it is exact ('16 KiB'), else bytes ('16381 B', not a rounded '16 KiB'): a
    switch between 16381 B and 16 KiB must not read as one between 16 KiB and 16 KiB."""
    if size is None or size != size or abs(float(size)) == float("inf"):
        return ""
    text = format_size(size)
    number, unit = text.split()
    exact = float(number) * 1024 ** ("B", "KiB", "MiB", "GiB", "TiB").index(unit) == float(size)
    return text if exact else f"{int(size)} B"
