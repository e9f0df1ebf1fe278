"""Model.generate(..., stream=True): text that never splits a character, and streams that
are closed when abandoned or say that they are open."""
import codecs
import gc

import pytest

import tinymlir as tm
from conftest import KJV_TINY
from tinymlir._stream import Stream, TextPieces

# Characters of 1 to 4 UTF-8 bytes; GPT-2's byte-level tokens split the longer ones.
MULTI_BYTE = "héllo 日本 🙂 naïve Ωμέγα"


@pytest.fixture(scope="module")
def kjv():
    model = tm.Model.load(KJV_TINY)
    yield model
    model.close()


def split_characters(model, ids):
    """How many tokens of `ids` end inside a UTF-8 character of their concatenation."""
    text = b"".join(model.detokenize_bytes([i]) for i in ids)
    ends, at = 0, 0
    for i in ids:
        at += len(model.detokenize_bytes([i]))
        if at < len(text) and (text[at] & 0xC0) == 0x80:   # the next byte continues a character
            ends += 1
    return ends


def incomplete_ends(model, ids):
    """How many tokens of `ids` have bytes that end inside a UTF-8 character."""
    count = 0
    for i in ids:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        decoder.decode(model.detokenize_bytes([i]))
        count += bool(decoder.getstate()[0])
    return count


def test_text_pieces_hold_a_split_character_back(kjv):
    ids = kjv.tokenize(MULTI_BYTE)
    assert split_characters(kjv, ids) >= 3   # 日, 🙂, ... each span tokens: the test can fail
    # Decoding each token on its own (what a stream of ids invites) breaks those characters.
    naive = "".join(kjv.detokenize([i]) for i in ids)
    assert "\ufffd" in naive and naive != MULTI_BYTE
    pieces = TextPieces(kjv.detokenize_bytes)
    out = [pieces.feed(i) for i in ids] + [pieces.finish()]
    assert "".join(out) == MULTI_BYTE
    assert all("\ufffd" not in piece for piece in out)
    assert "" in out                          # a token that completed no character yet
    # A generation that ends inside a character: the bytes left are one U+FFFD at the end.
    pieces = TextPieces(kjv.detokenize_bytes)
    partial = kjv.tokenize("🙂")[:-1]
    assert [pieces.feed(i) for i in partial] == [""] * len(partial)
    assert pieces.finish() == "\ufffd"


def test_a_stream_of_multi_byte_text_yields_whole_characters(kjv):
    # The Stream a generate(stream=True) returns, fed the tokens of multi-byte text (the
    # model's own tokenizer and detokenizer; the tokens come from this list instead of the
    # model's sampler, which kjv-tiny would never steer into 日本 or 🙂).
    ids = kjv.tokenize(MULTI_BYTE)
    fed = []

    def generate(on_token):
        for i in ids:
            fed.append(i)
            if on_token(i):
                break
        return fed

    pieces = list(Stream(kjv, generate, None, tokens=False))
    assert "".join(pieces) == MULTI_BYTE
    assert all(p and "\ufffd" not in p for p in pieces)
    assert len(pieces) < len(ids)            # pieces held back merged with the next
    tokens = list(Stream(kjv, generate, None, tokens=True))
    assert [t.id for t in tokens] == ids
    assert "".join(t.text for t in tokens) == MULTI_BYTE
    assert any(t.text == "" for t in tokens)   # a character not complete yet: held back


def test_streamed_text_is_the_generated_text(kjv):
    # Near-uniform sampling over the whole vocabulary (repeatable by its seed) draws tokens
    # whose bytes end inside a character.
    options = dict(max_new_tokens=200, temperature=1e6, top_k=0, seed=1)
    ids = kjv.generate("In the beginning", **options)
    assert incomplete_ends(kjv, ids) >= 1
    pieces = list(kjv.generate("In the beginning", stream=True, **options))
    assert "".join(pieces) == kjv.detokenize(ids)
    assert all(pieces)                        # no empty pieces in a text stream
    tokens = list(kjv.generate("In the beginning", stream="tokens", **options))
    assert [t.id for t in tokens if t.id is not None] == ids
    assert "".join(t.text for t in tokens) == "".join(pieces)


def test_streaming_the_readme_way_prints_the_text(kjv):
    ids = kjv.generate("In the beginning", max_new_tokens=20)
    out = []
    for piece in kjv.generate("In the beginning", max_new_tokens=20, stream=True):
        out.append(piece)
    assert "".join(out) == kjv.detokenize(ids)


def test_stream_option_is_checked(kjv):
    with pytest.raises(ValueError, match="stream must be False, True \\(text\\) or 'tokens'"):
        kjv.generate("x", stream="ids")


def test_a_stream_left_with_break_frees_the_model(kjv):
    for piece in kjv.generate("In the beginning", max_new_tokens=30, stream=True):
        break
    gc.collect()
    assert kjv.generate("In the beginning", max_new_tokens=2) == [286, 262]


def test_an_open_stream_is_named_by_busy_error_and_freed_by_close(kjv):
    stream = kjv.generate("In the beginning", max_new_tokens=30, stream=True)
    assert next(stream) == " of"
    with pytest.raises(tm.BusyError, match="this model has an open stream"):
        kjv.generate("In the beginning", max_new_tokens=2)
    stream.close()
    stream.close()                              # closing twice does nothing
    assert list(stream) == []
    assert kjv.generate("In the beginning", max_new_tokens=2) == [286, 262]
    # A stream never started holds nothing; a `with` block closes one that was.
    unstarted = kjv.generate("In the beginning", max_new_tokens=30, stream=True)
    assert kjv.generate("In the beginning", max_new_tokens=2) == [286, 262]
    del unstarted
    with kjv.generate("In the beginning", max_new_tokens=30, stream=True) as stream:
        next(stream)
    assert kjv.generate("In the beginning", max_new_tokens=2) == [286, 262]
    # A BusyError with no stream open says nothing of streams.
    def inside(token):
        with pytest.raises(tm.BusyError) as e:
            kjv.logits([1])
        assert "stream" not in str(e.value)
        return True
    kjv.generate("In the beginning", max_new_tokens=3, callback=inside)
