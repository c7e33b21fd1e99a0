# Loading errors are Python exceptions carrying cera's message: a missing file is a
# cera.NotFoundError that is also a FileNotFoundError and names the path; a file that is not GGUF
# is a cera.CorruptError; bad argument types are TypeErrors, bad values ValueErrors.
import pytest

import cera


def test_missing_file(tmp_path):
    path = tmp_path / "no-such-model.gguf"
    with pytest.raises(cera.NotFoundError) as e:
        cera.Engine(path)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, cera.Error)
    assert str(path) in str(e.value)


def test_not_a_gguf(tmp_path):
    path = tmp_path / "junk.gguf"
    path.write_bytes(b"this is not a GGUF file at all" * 10)
    with pytest.raises(cera.Error) as e:
        cera.Engine(path)
    assert str(path) in str(e.value)
    assert not isinstance(e.value, cera.NotFoundError)


def test_bad_arguments(stories_gguf):
    with pytest.raises(TypeError):
        cera.Engine(42)
    with pytest.raises(TypeError):
        cera.Engine(stories_gguf, n_ctx="big")
    with pytest.raises(cera.InvalidArgumentError, match="device 'tpu' is not one of 'auto', 'cpu', 'cuda'"):
        cera.Engine(stories_gguf, device="tpu")  # a str, but not a device: a bad value
    with pytest.raises(ValueError, match="n_ctx"):
        cera.Engine(stories_gguf, device="cpu", n_ctx=-5)
    with pytest.raises(TypeError):
        cera.Engine(stories_gguf, nctx=128)


def test_closed_engine(stories_gguf):
    engine = cera.Engine(stories_gguf, device="cpu")
    engine.close()
    assert engine.closed
    with pytest.raises(cera.Error, match="closed"):
        engine.generate("x", max_tokens=1)
