"""Sums of products whose value depends only on their inputs: never numpy's BLAS.

numpy hands ``a @ b`` and ``np.dot`` to its BLAS (OpenBLAS), which picks a kernel for the CPU and
splits a long sum over its threads (one per core unless ``OPENBLAS_NUM_THREADS`` says otherwise), so
the same sum could end in another last digit on a machine with another core count or CPU.  The
library's energy integrals and FGD's expected fragmentation use these two instead
(``tests/test_blas_threads.py`` runs them with 1, 2 and 4 threads and other CPUs' kernels).
"""

from __future__ import annotations

import math

import numpy as np


def sum_of_products(values: np.ndarray, weights: np.ndarray) -> float:
    """sum_i values[i] x weights[i], each product rounded once (IEEE multiply) and the sum of the
    rounded products correctly rounded (``math.fsum``): the result does not depend on the order of
    the terms, the CPU, the thread count or the numpy version.  An energy integral sum_i P_i x dt_i of
    a step series is this with P in W and dt in s.

    Inf or NaN products give numpy's answer (inf, or NaN for inf - inf); finite products whose exact
    sum leaves the float range give +-inf, as numpy's sum would.

    >>> sum_of_products(np.array([100.0, 300.0]), np.array([10.0, 10.0]))      # 100 W x 10 s + 300 W x 10 s
    4000.0
    >>> sum_of_products(np.array([1e16, 1.0, -1e16]), np.ones(3))              # exact: a plain sum gives 0.0
    1.0
    >>> sum_of_products(np.array([1e308, 1e308]), np.ones(2)), sum_of_products(np.array([], float), np.array([], float))
    (inf, 0.0)
    """
    products = np.multiply(values, weights, dtype=float)
    if np.isfinite(products).all():
        try:
            return math.fsum(products.tolist())
        except OverflowError:          # the exact sum of finite products is beyond the float range
            pass
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.add.reduce(products, axis=None))


def row_sums_of_products(matrix: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_m matrix[n, m] x weights[m] for every row n: the products (IEEE multiply) in a new C-ordered
    array, then numpy's pairwise sum along each row (``np.add.reduce`` over the last, contiguous axis:
    blocks of up to 128 terms in eight interleaved partial sums, halves above that).  numpy fixes that
    order in its own code, whatever the CPU or thread count, and a row's sum does not depend on the
    other rows: one node alone gets the bits it gets among all nodes.  Rounding is that of a pairwise
    sum (error at most about log2(M) ulps of the sum of |terms|), at the speed of a matrix-vector product
    for the tens of task classes of a target workload.

    >>> row_sums_of_products(np.array([[300.0, 1900.0, 1900.0], [4000.0, 4000.0, 4000.0]]), np.array([0.5, 0.3, 0.2]))
    array([1100., 4000.])
    """
    products = np.multiply(matrix, weights, dtype=float, order="C")
    return np.add.reduce(products, axis=-1)
