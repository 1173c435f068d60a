"""Sizes as the command lines take them: 2^24, 1000000, 1e6."""


def parse_size(text: str) -> int:
    text = text.strip()
    if "^" in text:
        base, exp = text.split("^")
        return int(base) ** int(exp)
    return int(float(text))
