"""Are IMDB's training reviews grouped by movie? (Why the IMDB recipe uses ``val_split: last``.)

IMDB's official test reviews are of other movies than its training reviews. If reviews with
neighbouring ids are of the same movie, a random validation sample shares movies with the
training data, and validation accuracy overestimates test accuracy. Evidence without the
(not shipped) URL lists: neighbouring reviews share far more capitalised words (titles,
actors' and characters' names) than random pairs.

    python benchmarks/imdb_movie_groups.py [--data-dir DIR] [--n 3000]
"""

from __future__ import annotations

import argparse
import random
import re

from attnkit.data.readers import load_text_classification


def capitalised(text: str) -> set[str]:
    """Capitalised words of 4+ letters: mostly names and titles."""
    return set(re.findall(r"\b[A-Z][a-z]{3,}\b", text))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / max(1, len(a | b))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--n", type=int, default=3000, help="reviews per class to compare")
    args = parser.parse_args()
    examples = load_text_classification("imdb", "train", data_dir=args.data_dir)
    for label in (0, 1):  # the file is sorted by label, then by id
        words = [capitalised(ex.text) for ex in examples if int(ex.label) == label][: args.n]
        rng = random.Random(0)
        pairs = [(rng.randrange(len(words)), rng.randrange(len(words))) for _ in words]
        pairs = [(a, b) for a, b in pairs if a != b]
        neighbours = sum(jaccard(words[i], words[i + 1]) for i in range(len(words) - 1))
        neighbours /= len(words) - 1
        random_pairs = sum(jaccard(words[a], words[b]) for a, b in pairs) / len(pairs)
        print(
            f"label {label}: capitalised-word overlap (Jaccard) of neighbouring reviews "
            f"{neighbours:.4f}, of random pairs {random_pairs:.4f} "
            f"({neighbours / random_pairs:.1f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
