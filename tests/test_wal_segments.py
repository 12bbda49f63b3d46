"""WAL segment names read as positions (conversations/retention/pgfiles.py): the erasure
decides from them whether a recycled segment that still holds erased text is within reach."""

import pytest

from conversations.retention import pgfiles

MB = 2 ** 20


@pytest.mark.parametrize(("size", "per_log"), [(16 * MB, 256), (64 * MB, 64), (1 * MB, 4096), (1024 * MB, 4)])
def test_a_segment_past_a_4_gb_boundary_is_the_next_one_not_petabytes_ahead(size, per_log):
    last_of_log_0 = f"00000001{0:08X}{per_log - 1:08X}"
    first_of_log_1 = f"00000001{1:08X}{0:08X}"
    assert pgfiles.segment_number(first_of_log_1, size) - pgfiles.segment_number(last_of_log_0, size) == 1
    # The case CI met: the log at 0/50, a recycled file named 1/01 ahead of it.
    ahead = pgfiles.segment_number("000000010000000100000001", size) - pgfiles.segment_number(
        "000000010000000000000050", size)
    assert ahead == per_log + 1 - 0x50
    assert ahead * size == (2 ** 32 + size - 0x50 * size)


def test_segments_keep_their_order_and_the_timeline_does_not_count():
    names = ["000000010000000000000001", "0000000100000000000000FF", "000000010000000100000000",
             "000000010000000200000003"]
    numbers = [pgfiles.segment_number(n, 16 * MB) for n in names]
    assert numbers == sorted(numbers) == [1, 255, 256, 515]
    assert pgfiles.segment_number("000000020000000100000000", 16 * MB) == 256
