"""The textbook edit distance, for the brute-force checks of the asm and primers references
(tiny inputs only): shared here so neither module reaches into the other."""


def edit_distance(a: bytes, b: bytes) -> int:
    """Plain Levenshtein distance, pure Python: the textbook recurrence, nothing shared above."""
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1]))
        previous = current
    return previous[-1]
