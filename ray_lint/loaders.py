"""Calls that load something big into the calling process: whole files read into memory, and models.

Several rules ask whether a task, an actor or a Ray Data UDF does such a load: to size its memory
(RAY045, RAY106) or to do it once rather than per batch (RAY102). The tables are qualified names, as
`model.call_name` resolves them through imports and aliases. (`ray_lint.sizes.DATA_LOADERS` is the
narrower list of loaders whose *result* counts as a large object to pass around.)"""

from __future__ import annotations

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import dotted_name

# Calls that read a whole file, or a pickled model, into the heap.
FILE_LOADERS = frozenset({
    "pandas.read_csv", "pandas.read_parquet", "pandas.read_json", "pandas.read_excel", "pandas.read_feather",
    "pandas.read_pickle", "pandas.read_hdf", "pandas.read_table", "pandas.read_orc",
    "polars.read_csv", "polars.read_parquet", "polars.read_json", "polars.read_ipc",
    "pyarrow.parquet.read_table", "pyarrow.csv.read_csv", "pyarrow.feather.read_table",
    "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile",
    "torch.load", "pickle.load", "joblib.load", "cloudpickle.load",
    "tensorflow.keras.models.load_model", "keras.models.load_model",
})
# llama.cpp's model, directly or through LangChain: a local LLM loaded from a GGUF file.
LLAMA_CPP_LOADERS = (
    "llama_cpp.Llama", "langchain_community.llms.LlamaCpp", "langchain_community.llms.llamacpp.LlamaCpp",
    "langchain.llms.LlamaCpp",
)
# Calls that build a model (or an inference session around one): weights loaded into the heap.
MODEL_LOADERS = frozenset({
    "transformers.pipeline", "onnxruntime.InferenceSession", "tensorflow.keras.models.load_model",
    "keras.models.load_model", "keras.saving.load_model", "torch.hub.load", "torch.jit.load",
    "sentence_transformers.SentenceTransformer", "spacy.load", "whisper.load_model", "vllm.LLM", "ultralytics.YOLO",
    "open_clip.create_model_and_transforms", "mlflow.pyfunc.load_model", "mlflow.pytorch.load_model",
    "mlflow.sklearn.load_model", "lightgbm.Booster", "xgboost.Booster", "gensim.models.KeyedVectors.load",
    "faster_whisper.WhisperModel", *LLAMA_CPP_LOADERS,
})
# Methods that load a pretrained model whatever class they are called on (transformers, diffusers,
# sentence-transformers, tokenizers).
MODEL_LOADER_METHODS = frozenset({"from_pretrained"})
# The loaders of `MODEL_LOADERS` that build a neural network (an LLM, a diffusion pipeline, a vision net).
NEURAL_MODEL_LOADERS = frozenset({
    "transformers.pipeline", "onnxruntime.InferenceSession", "torch.hub.load", "sentence_transformers.SentenceTransformer", "whisper.load_model",
    "vllm.LLM", "ultralytics.YOLO", "timm.create_model", "faster_whisper.WhisperModel", *LLAMA_CPP_LOADERS,
})
# Modules whose classes (Keras) or functions (torchvision) build a vision network: `MobileNetV2(weights=
# "imagenet")`, `torchvision.models.resnet50(weights=...)`.
KERAS_APPLICATIONS = ("tensorflow.keras.applications.", "keras.applications.")
TORCHVISION_MODELS = "torchvision.models."
# Functions of `torchvision.models` that do not build a network.
TORCHVISION_NOT_MODELS = frozenset({"get_weight", "get_model_weights", "list_models"})
# Text a file needs to load a neural model in one of the ways `loads_neural_model` knows.
NEURAL_MODEL_TOKENS = (
    "from_pretrained", "pipeline", "hub", "SentenceTransformer", "load_model", "LLM", "YOLO", "Model.load", "create_model",
    "applications", "torchvision", "Llama", "WhisperModel", "InferenceSession",
)
# Classes whose `from_pretrained` loads something small beside a model: tokenizers, configs, processors.
NOT_MODELS = ("Tokenizer", "Config", "Processor", "FeatureExtractor")


def loads_neural_model(model: SemanticModel, call: cst.Call) -> bool:
    """Whether the call builds a neural network from its weights, one whose forward pass takes tens of
    milliseconds or more: one of `NEURAL_MODEL_LOADERS`, a `from_pretrained` of a model class (not of a
    tokenizer or a config), `SomeModel.load(...)` (Ludwig), or a vision network's constructor (a Keras
    application, a `torchvision.models` builder). An ONNX Runtime session counts: ONNX is how neural
    networks are exported for serving (a scikit-learn model converted to ONNX is the rare exception).
    Classic models (XGBoost, scikit-learn through MLflow or joblib) and Keras files of any size are left
    out: a prediction of theirs may take a millisecond."""
    func = call.func
    if isinstance(func, cst.Attribute):
        receiver = dotted_name(func.value) or ""
        last = receiver.rpartition(".")[2]
        if func.attr.value in MODEL_LOADER_METHODS:
            return not any(word in last for word in NOT_MODELS)
        if func.attr.value == "load" and last.endswith("Model"):
            return True
    site = model.call_site(call)
    name = model.call_name(site) if site is not None else None
    if name is None:
        return False
    last = name.rpartition(".")[2]
    if name.startswith(KERAS_APPLICATIONS):
        return last[:1].isupper()  # a class (`MobileNetV2`), not `preprocess_input`
    if name.startswith(TORCHVISION_MODELS):
        return name.count(".") == 2 and last[:1].islower() and last not in TORCHVISION_NOT_MODELS
    return name in NEURAL_MODEL_LOADERS
