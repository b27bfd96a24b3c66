"""solver.formats.sniff's bounded gzip inflation: the bytes of every member, as Python's gzip module inflates them,
never more than a step at a time, refused as soon as they pass the limit (a bomb costs no memory), and a corrupt or
cut stream named as such."""

import gzip
import io
import tracemalloc

import pytest

from solver.formats.sniff import INFLATE_STEP, CorruptGzip, InflatedTooLarge, gunzip, gunzip_chunks

MiB = 1 << 20


def test_every_member_inflates_as_pythons_gzip_does_a_step_at_a_time():
    text = "".join(f"{i},{i * i}\n" for i in range(150_000)).encode()  # 2.1 MB of text
    data = gzip.compress(text[:1_500_000]) + gzip.compress(text[1_500_000:]) + gzip.compress(b"")
    chunks = list(gunzip_chunks(io.BytesIO(data), len(text)))
    assert b"".join(chunks) == gzip.decompress(data) == text
    assert max(map(len, chunks)) <= INFLATE_STEP
    assert gunzip(data, len(text)) == text


def refused_with_peak(inflate) -> tuple[int, int]:
    """(the limit InflatedTooLarge names, the most memory Python held meanwhile) of calling ``inflate``."""
    tracemalloc.start()
    try:
        inflate()
    except InflatedTooLarge as refused:
        return refused.limit, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    raise AssertionError("not refused")


def test_a_bomb_is_refused_once_past_the_limit_holding_a_few_steps():
    bomb = gzip.compress(b"0" * (64 * MiB)) * 16  # 1 GiB inflated from 1 MB
    inflated = []

    def each_chunk() -> None:
        for chunk in gunzip_chunks(io.BytesIO(bomb), 100 * MiB):
            inflated.append(len(chunk))

    for inflate in (each_chunk, lambda: gunzip(bomb, 100 * MiB)):  # gunzip counts first: nothing of it kept
        limit, peak = refused_with_peak(inflate)
        # a few steps (a step read, its unconsumed tail, a step inflated), never the 100 MiB inflated
        assert limit == 100 * MiB and peak < 8 * INFLATE_STEP, peak
    assert 100 * MiB - INFLATE_STEP < sum(inflated) <= 100 * MiB


@pytest.mark.parametrize(
    "data",
    [
        gzip.compress(b"a,b\n1,2\n" * 1000)[:-12],  # cut short inside the member
        gzip.compress(b"a,b\n1,2\n") + b"not gzip",  # garbage after a member
        b"\x1f\x8b" + b"\x00" * 30,  # a gzip magic and no gzip
    ],
    ids=["cut short", "garbage after a member", "no gzip after the magic"],
)
def test_a_corrupt_or_cut_stream_is_named_so(data):
    with pytest.raises(CorruptGzip):
        list(gunzip_chunks(io.BytesIO(data), 10 * MiB))
