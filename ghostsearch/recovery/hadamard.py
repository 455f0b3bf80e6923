"""Hadamard matrices (entries +-1, H H^T = n I) for the LinearPatch rotation.

``hadamard_pm1(n)`` builds one as a Kronecker product of a Sylvester matrix of order 2^j (largest
j first) and a base of order m = n / 2^j:

* m in {1, 2}: Sylvester alone;
* Paley I, m = q + 1 with q an odd prime power, q = 3 (mod 4): H = I + [[0, 1^T], [-1, Q]];
* Paley II, m = 2 (q + 1) with q = 1 (mod 4): H = C x [[1, -1], [-1, -1]] + I x [[1, 1], [1, -1]],
  C = [[0, 1^T], [1, Q]] the symmetric conference matrix;
* Williamson, m = 4 w for the orders w in ``WILLIAMSON`` (39 and 43: H(156), H(172)).

Q is the Jacobsthal matrix Q[a, b] = chi(a - b) of GF(q) (chi: the quadratic character), with
GF(p^e) built as GF(p)[x] / f for e <= 3 (f: the first monic cubic/quadratic without a root).
So every order in the QuaRot-style table (12, 20, 28, 36, 40, 52, 60, 108, 140, 156, 172) times a
power of two is covered, and many more (576 = 16 x 36, H(36) from Paley II with q = 17).
``hadamard_pm1`` returns None for an order it cannot build (e.g. any n not divisible by 4 except
1 and 2, or 92 = 4 x 23); ``orthonormal(n)`` then falls back, documented, to the block-diagonal
sum of normalised Sylvester blocks over the binary digits of n (576 would be 512 + 64) —
orthonormal, but it mixes channels only inside each block.

Two constructions of order n (``CONSTRUCTIONS_OF_N``), for LinearPatch's ``recovery.linearpatch_rotation``:

* ``quarot`` (the default): the matrix the LinearPatch authors' code rotates with, QuaRot's /
  QuIP#'s ``matmul_hadU`` applied to the identity: H = (had_K x Sylvester(n / K))^T, K the first of
  QuaRot's base orders 172, 156, 148, 140, 108, 60, 52, 36, 28, 40, 20, 12 that divides n (n / K a
  power of two), Sylvester alone when none does. The bases are Sloane's tables as QuaRot ships them;
  those built here by rule, each checked entry by entry against QuaRot's table: had12, had20, had60
  = [[1, -1^T], [1, I + Q]] (Paley I, q = 11, 19, 59); had28, had36 = [[C + I, C - I], [C - I, -C - I]]
  (Paley II in block form, q = 13, 17; C the symmetric conference matrix); had40 = [[1, 1], [1, -1]] x
  had20. SmolLM2's 576 is had36 x Sylvester(16), Gemma-3's 640 is had40 x Sylvester(16). For a base
  not built here (had52, had108, had140, had148, had156, had172) ``quarot_pm1`` returns None and
  ``orthonormal`` falls back, said so by ``describe``, to ``paley``.
* ``paley``: ``hadamard_pm1`` above, Sylvester(2^j) x base with the Paley II base interleaved
  (576 = Sylvester(16) x H(36)). Equally a Hadamard matrix, not a signed permutation of ``quarot``'s.
"""

from __future__ import annotations

import functools

import numpy as np

# Williamson quadruples: the first rows of four symmetric circulant +-1 matrices A, B, C, D with
# A^2 + B^2 + C^2 + D^2 = 4 w I. w = 43: Hall (1983); w = 39: Long (2013); as tabulated in
# SageMath's ``williamson_type_quadruples_smallcases``. The tests check H H^T = 4 w I.
WILLIAMSON = {
    39: (
        "+++--+-+-----+--++----++--+-----+-+--++",
        "+++--++-+---+-+--+----+--+-+---+-++--++",
        "++++---+--++----+-+--+-+----++--+---+++",
        "+---++-+-+-----+++-++-+++-----+-+-++---",
    ),
    43: (
        "++---++++-+--+--++--------++--+--+-++++---+",
        "+++-+-++--+-+-++++-+----+-++++-+-+--++-+-++",
        "++-++++++----+-+--++-++-++--+-+----++++++-+",
        "+---++--++++-+-+++-++--++-+++-+-++++--++---",
    ),
}


def sylvester(n: int) -> np.ndarray:
    """+-1 Sylvester matrix of order n (a power of two)."""
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def prime_power(q: int) -> tuple[int, int] | None:
    """(p, e) with q = p^e, or None."""
    for p in range(2, int(q**0.5) + 1):
        if q % p == 0:
            e = 0
            while q % p == 0:
                q, e = q // p, e + 1
            return (p, e) if q == 1 else None
    return (q, 1) if q > 1 else None


def _mul(a: list[int], b: list[int], p: int, f: list[int]) -> list[int]:
    """Product in GF(p)[x] / (x^e + f[e-1] x^(e-1) + ... + f[0]), coefficients low to high."""
    e = len(f)
    prod = [0] * (2 * e - 1)
    for i, ai in enumerate(a):
        for j, bj in enumerate(b):
            prod[i + j] += ai * bj
    for d in range(2 * e - 2, e - 1, -1):  # x^d = -x^(d-e) * (f[0] + ... + f[e-1] x^(e-1))
        c, prod[d] = prod[d] % p, 0
        for i in range(e):
            prod[d - e + i] -= c * f[i]
    return [x % p for x in prod[:e]]


def _modulus(p: int, e: int) -> list[int]:
    """A monic irreducible polynomial of degree e <= 3 over GF(p) (irreducible = has no root)."""
    for code in range(p**e):
        f = [code // p**i % p for i in range(e)]
        if all((x**e + sum(c * x**i for i, c in enumerate(f))) % p for x in range(p)):
            return f
    raise AssertionError(f"no irreducible polynomial of degree {e} over GF({p})")


def jacobsthal(q: int) -> np.ndarray | None:
    """Q[a, b] = chi(a - b) over GF(q) (q an odd prime power p^e, e <= 3), else None."""
    pe = prime_power(q)
    if pe is None or pe[0] == 2 or pe[1] > 3:
        return None
    p, e = pe
    f = _modulus(p, e) if e > 1 else [0]
    digits = np.array([[x // p**i % p for i in range(e)] for x in range(q)], dtype=np.int64)
    squares = {sum(c * p**i for i, c in enumerate(_mul(list(d), list(d), p, f))) for d in digits[1:]}
    chi = np.array([0] + [1 if x in squares else -1 for x in range(1, q)], dtype=np.int64)
    diff = (digits[:, None, :] - digits[None, :, :]) % p
    return chi[(diff * p ** np.arange(e)).sum(-1)]


def paley1(m: int) -> np.ndarray | None:
    q = m - 1
    if q < 3 or q % 4 != 3 or (Q := jacobsthal(q)) is None:
        return None
    s = np.zeros((m, m), dtype=np.int64)
    s[0, 1:], s[1:, 0], s[1:, 1:] = 1, -1, Q
    return np.eye(m, dtype=np.int64) + s


def paley2(m: int) -> np.ndarray | None:
    if m % 2:
        return None
    q = m // 2 - 1
    if q < 5 or q % 4 != 1 or (Q := jacobsthal(q)) is None:
        return None
    c = np.zeros((q + 1, q + 1), dtype=np.int64)
    c[0, 1:], c[1:, 0], c[1:, 1:] = 1, 1, Q
    return np.kron(c, [[1, -1], [-1, -1]]) + np.kron(np.eye(q + 1, dtype=np.int64), [[1, 1], [1, -1]])


def circulant(signs: str) -> np.ndarray:
    """The circulant matrix with first row ``signs`` ('+'/'-'): C[i, j] = row[(j - i) mod n]."""
    row = np.array([1 if ch == "+" else -1 for ch in signs], dtype=np.int64)
    return np.stack([np.roll(row, i) for i in range(len(row))])


def williamson(m: int) -> np.ndarray | None:
    if m % 4 or m // 4 not in WILLIAMSON:
        return None
    a, b, c, d = map(circulant, WILLIAMSON[m // 4])
    return np.block([[a, b, c, d], [-b, a, -d, c], [-c, d, a, -b], [-d, -c, b, a]])


CONSTRUCTIONS = {"paley1": paley1, "paley2": paley2, "williamson": williamson}


@functools.lru_cache(maxsize=32)
def construction(n: int) -> tuple[int, int, str] | None:
    """(2^j, m, name) such that H(n) = Sylvester(2^j) x name(m), largest 2^j first; None if unknown."""
    if n < 1:
        return None
    j = (n & -n).bit_length() - 1  # the largest power of two dividing n
    for jj in range(j, -1, -1):
        m = n >> jj
        if m in (1, 2):
            return 1 << jj, m, "sylvester"
        if m % 4 == 0:
            for name, build in CONSTRUCTIONS.items():
                if build(m) is not None:
                    return 1 << jj, m, name
    return None


def hadamard_pm1(n: int) -> np.ndarray | None:
    """A +-1 Hadamard matrix of order n (int64), or None when no construction here covers n."""
    how = construction(n)
    if how is None:
        return None
    two, m, name = how
    base = sylvester(m) if name == "sylvester" else CONSTRUCTIONS[name](m)
    return np.kron(sylvester(two), base)


# QuaRot's get_hadK: the base orders in the order it tries them
QUAROT_ORDERS = (172, 156, 148, 140, 108, 60, 52, 36, 28, 40, 20, 12)
CONSTRUCTIONS_OF_N = ("quarot", "paley")


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def paley1_quarot(m: int) -> np.ndarray | None:
    """[[1, -1^T], [1, I + Q]] over GF(m - 1), m - 1 = 3 (mod 4): QuaRot's had12, had20, had60."""
    q = m - 1
    if q < 3 or q % 4 != 3 or (Q := jacobsthal(q)) is None:
        return None
    h = np.zeros((m, m), dtype=np.int64)
    h[0, 0], h[0, 1:], h[1:, 0] = 1, -1, 1
    h[1:, 1:] = np.eye(q, dtype=np.int64) + Q
    return h


def paley2_block(m: int) -> np.ndarray | None:
    """[[C + I, C - I], [C - I, -C - I]], C the symmetric conference matrix of GF(m / 2 - 1),
    m / 2 - 1 = 1 (mod 4): QuaRot's had28 and had36 (Sloane's had.36.pal2)."""
    if m % 2:
        return None
    q = m // 2 - 1
    if q < 5 or q % 4 != 1 or (Q := jacobsthal(q)) is None:
        return None
    c = np.zeros((q + 1, q + 1), dtype=np.int64)
    c[0, 1:], c[1:, 0], c[1:, 1:] = 1, 1, Q
    eye = np.eye(q + 1, dtype=np.int64)
    return np.block([[c + eye, c - eye], [c - eye, -c - eye]])


def quarot_base(k: int) -> np.ndarray | None:
    """QuaRot's had_k for the bases built here by rule (12, 20, 28, 36, 40, 60), else None."""
    if k in (12, 20, 60):
        return paley1_quarot(k)
    if k in (28, 36):
        return paley2_block(k)
    if k == 40:
        h20 = paley1_quarot(20)
        return None if h20 is None else np.kron(np.array([[1, 1], [1, -1]], dtype=np.int64), h20)
    return None


def quarot_k(n: int) -> int | None:
    """QuaRot's base order for n (1: a power of two), or None where its get_hadK has none."""
    for k in QUAROT_ORDERS:
        if n % k == 0:
            return k if is_pow2(n // k) else None  # QuaRot asserts here: no other base is tried
    return 1 if is_pow2(n) else None


def quarot_pm1(n: int) -> np.ndarray | None:
    """The +-1 matrix QuaRot's matmul_hadU(I_n) scales by 1/sqrt(n): (had_K x Sylvester(n/K))^T,
    or None where QuaRot has no base for n or its base is not built here."""
    k = quarot_k(n)
    if k is None:
        return None
    if k == 1:
        return sylvester(n)
    base = quarot_base(k)
    return None if base is None else np.kron(base, sylvester(n // k)).T.copy()


def check_construction(name: str) -> str:
    if name not in CONSTRUCTIONS_OF_N:
        from ghostsearch.core.errors import GhostsearchError

        raise GhostsearchError(
            f"Hadamard construction {name!r} is unknown; use one of: {', '.join(CONSTRUCTIONS_OF_N)}"
        )
    return name


def describe(n: int, how: str = "paley") -> str:
    """How ``orthonormal(n, how)`` is built, for operator reports."""
    if check_construction(how) == "quarot":
        k = quarot_k(n)
        if k == 1:
            return f"hadamard {n} (sylvester, quarot)"
        if k is not None and quarot_base(k) is not None:
            return f"hadamard had{k}^T x sylvester {n // k} (quarot)"
        why = f"had{k} is not built here" if k is not None else "QuaRot has no base for it"
        return describe(n) + f" (paley: {why})"
    built = construction(n)
    if built is None:
        parts = [1 << i for i in reversed(range(n.bit_length())) if n >> i & 1]
        return "block-diagonal sylvester " + "+".join(map(str, parts)) + " (no Hadamard construction)"
    two, m, name = built
    return f"hadamard {two}x{m} ({name})" if name != "sylvester" else f"hadamard {n} (sylvester)"


def orthonormal(n: int, how: str = "paley") -> np.ndarray:
    """H / sqrt(n) (float64) for a Hadamard order, by construction ``how`` (quarot falls back to
    paley where it has no matrix); else the block-diagonal Sylvester fallback."""
    h = quarot_pm1(n) if check_construction(how) == "quarot" else None
    if h is None:
        h = hadamard_pm1(n)
    if h is not None:
        return h / np.sqrt(n)
    parts = [1 << i for i in reversed(range(n.bit_length())) if n >> i & 1]
    out = np.zeros((n, n))
    at = 0
    for s in parts:
        out[at : at + s, at : at + s] = sylvester(s) / np.sqrt(s)
        at += s
    return out
