"""Vectors as bytes, and the arithmetic on them that needs no database.

A vector is stored as little-endian float32 (4 bytes a dimension: 1 KiB for the embedded
model's 256), unit length, so a dot product is its cosine. A binary code keeps one bit a
dimension, the sign (32 bytes for 256 dimensions): the Hamming distance between two codes
tracks the angle between their vectors well enough for a first pass over a million rows,
whose few hundred best are then ranked again on their exact vectors.
"""

import numpy as np

FLOAT = np.dtype("<f4")


def normalised(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=FLOAT).tobytes()


def from_bytes(blob, dimension: int | None = None) -> np.ndarray:
    vector = np.frombuffer(bytes(blob), dtype=FLOAT)
    if dimension is not None and vector.shape[0] != dimension:
        raise ValueError(f"a stored vector has {vector.shape[0]} dimensions, not {dimension}")
    return vector


def matrix(blobs, dimension: int) -> np.ndarray:
    """Stored vectors as one (n, dimension) array."""
    if not blobs:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.frombuffer(b"".join(bytes(b) for b in blobs), dtype=FLOAT).reshape(len(blobs), dimension)


def binary_code(vector: np.ndarray) -> bytes:
    """One bit a dimension: set where the value is positive."""
    return np.packbits(np.asarray(vector) > 0).tobytes()


def binary_codes(vectors: np.ndarray) -> np.ndarray:
    """(n, dimension / 8) uint8: each row's binary code."""
    return np.packbits(np.asarray(vectors) > 0, axis=1)


def hamming(codes: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Bits differing between each row of `codes` ((n, b) uint8) and `code` ((b,) uint8)."""
    return np.bitwise_count(np.bitwise_xor(codes, code)).sum(axis=1, dtype=np.int32)
