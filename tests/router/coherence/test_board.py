"""The workers' shared board: the generation, the slots, shared across a fork."""

from __future__ import annotations

import os

import pytest

from router.coherence.board import Board


def test_bump_counts_writes() -> None:
    board = Board(4)
    assert board.generation == 0
    assert [board.bump() for _ in range(3)] == [1, 2, 3]
    assert board.generation == 3


def test_slots_claim_apply_release() -> None:
    board = Board(2)
    first = board.claim(101, 0)
    second = board.claim(102, 0)
    assert {first, second} == {0, 1}
    assert board.claim(103, 0) is None  # full
    generation = board.bump()
    assert sorted(board.behind(generation)) == [101, 102]
    assert board.behind(generation, besides=101) == [102]
    assert first is not None
    board.applied(first, generation)
    assert board.behind(generation) == [102]
    board.applied(first, generation - 1)  # never backwards
    assert board.workers() == {101: generation, 102: 0}
    board.release(102)
    assert board.behind(generation) == []
    assert board.claim(103, generation) is not None  # the freed slot
    assert board.workers() == {101: generation, 103: generation}


def test_a_slot_claimed_behind_is_waited_for() -> None:
    board = Board(2)
    generation = board.bump()
    board.claim(7, generation - 1)  # loaded before the write
    assert board.behind(generation) == [7]


def test_at_least_one_slot() -> None:
    with pytest.raises(ValueError):
        Board(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_shared_across_fork() -> None:
    """What a forked worker writes, the supervisor and the other workers read."""
    board = Board(4)
    read_r, write_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a worker that writes twice and takes a slot
        try:
            board.bump()
            generation = board.bump()
            slot = board.claim(os.getpid(), 0)
            assert slot is not None
            board.applied(slot, generation)
            os.write(write_w, b"done")
        finally:
            os._exit(0)
    os.close(write_w)
    assert os.read(read_r, 4) == b"done"
    os.close(read_r)
    os.waitpid(pid, 0)
    assert board.generation == 2
    assert board.workers() == {pid: 2}
    board.release(pid)  # what the supervisor does when it reaps the worker
    assert board.workers() == {}
