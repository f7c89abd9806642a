r"""Randomness for dpkit: a secure default generator and exact, vectorised samplers.

What lives here
---------------
* Generators (all :class:`numpy.random.Generator` instances; ``Rng`` is that type, for annotations):
  :func:`secure_rng` (a new cryptographically secure generator keyed from the operating system),
  :func:`default_rng` (this process's shared secure generator, used by ``rng=None``),
  :func:`insecure_seeded` (a seeded :class:`InsecureGenerator`, for tests and reproducible examples
  only; not private) and :func:`is_insecure` (what a release records about its noise).
* :func:`resolve_rng`: the one resolver of an ``rng=`` argument that every sampler, mechanism,
  distribution and query uses (``None`` gives :func:`default_rng`, a ``Generator`` is used as it is,
  anything else raises :class:`~dpkit.errors.ArgumentTypeError`).
* Exact samplers, each with ``size`` and a keyword ``rng`` that defaults to :func:`default_rng`:
  :func:`bernoulli_exp` (Bernoulli(:math:`e^{-\gamma}`)), :func:`geometric`
  (:math:`P(k) \propto e^{-k/\mathrm{scale}}`, :math:`k \ge 0`), :func:`discrete_laplace`
  (:math:`P(k) \propto e^{-|k|/\mathrm{scale}}`) and :func:`discrete_gaussian`
  (:math:`P(k) \propto e^{-k^2/(2\sigma^2)}`).

Contract
--------
1. **Secure by default.**  With ``rng=None`` every sampler draws from :func:`default_rng`, one per
   process, keyed from the operating system and re-keyed in a forked child: AES-128 in counter mode
   where the CPU has AES-NI (constant-time in hardware; NIST SP 800-90A's CTR_DRBG core; ~10x the
   throughput of ChaCha20 here, which the mechanisms' speed needs), ChaCha20 (20 rounds, RFC 8439,
   256-bit key, constant-time in software) everywhere else.  Software AES is never used: without
   AES-NI randomgen would fall back to table-based AES, which leaks its key through cache timing.
   :func:`secure_rng` makes independent generators (ChaCha20 unless ``cipher="aes128"``).  There is
   no module-level generator with a fixed seed.  The key is passed to randomgen as ``key=``, not
   ``seed=``, so it does not go through NumPy's non-cryptographic ``SeedSequence``.  Details:
   :mod:`dpkit.random._generators`.
2. **Exact.**  Given ideal uniform random bits, each sampler's output law is *exactly* the stated
   pmf for the parameter as given (a float is the dyadic rational it represents): no truncated
   support, no floating-point rounding that depends on the data, no approximation of
   :math:`e^{-x}`.  Float64 arithmetic is used only to *certify* decisions, with margins derived
   from IEEE 754's error bounds for ``+ - * /``; a decision the margin cannot certify (at most about
   ``2e-7`` of draws, usually far fewer) is recomputed exactly with Python integers and fractions,
   drawing more random words as needed.  ``numpy.log`` is used only for guesses whose accuracy
   affects speed, not the law.
3. **Vectorised.**  Work is done on whole arrays in blocks of 65,536 draws; rejection loops run over
   rounds, all pending draws together, never as a Python loop per draw.  Memory is O(size).
4. **Validated at the boundary.**  Bad parameters raise :class:`ValueError` naming the parameter and
   value; a non-Generator ``rng`` raises :class:`~dpkit.errors.ArgumentTypeError` (a :class:`TypeError`),
   from :func:`resolve_rng`.

The samplers' exactness arguments are in the docstrings of :mod:`dpkit.random._geometric`,
:mod:`dpkit.random._bernoulli` and :mod:`dpkit.random._gaussian`; the arithmetic they rely on is in
:mod:`dpkit.random._arith`.

References
----------
Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
arXiv 2004.00010v5, Algorithms 1-3.  Mironov 2012, "On significance of the least significant bits
for differential privacy" (why floating-point noise is not enough).
"""

from dpkit.random._bernoulli import bernoulli_exp
from dpkit.random._checks import resolve_rng
from dpkit.random._gaussian import discrete_gaussian
from dpkit.random._generators import (
    InsecureGenerator,
    Rng,
    SecureGenerator,
    default_rng,
    insecure_seeded,
    is_insecure,
    secure_rng,
)
from dpkit.random._geometric import discrete_laplace, geometric

__all__ = [
    "InsecureGenerator",
    "Rng",
    "SecureGenerator",
    "bernoulli_exp",
    "default_rng",
    "discrete_gaussian",
    "discrete_laplace",
    "geometric",
    "insecure_seeded",
    "is_insecure",
    "resolve_rng",
    "secure_rng",
]
