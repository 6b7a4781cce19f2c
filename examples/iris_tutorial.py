"""onnxruntime's scikit-learn tutorial, run by onnxc: only the import changes.

Part 1 is "Train, convert and predict" (iris, LogisticRegression, skl2onnx, InferenceSession).
Part 2 is onnxruntime's backend tutorial on the iris logistic regression onnxruntime ships
(datasets/logreg_iris.onnx; rebuilt here from its attributes when onnxruntime is not installed):
it prints labels [1 1 0] and first-row probabilities {0: 0.0273, 1: 0.5176, 2: 0.4551}.

    pip install scikit-learn skl2onnx      # then, from the repository root:
    python examples/iris_tutorial.py
"""
import numpy
import onnx
from onnx import helper
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import FloatTensorType

import onnxc as rt
import onnxc.backend as backend

# ---- part 1: train, convert, predict --------------------------------------------------------
iris = load_iris()
X, y = iris.data, iris.target
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
clr = LogisticRegression(max_iter=500)
clr.fit(X_train, y_train)

initial_type = [("float_input", FloatTensorType([None, 4]))]
onx = convert_sklearn(clr, initial_types=initial_type)
with open("logreg_iris.onnx", "wb") as f:
    f.write(onx.SerializeToString())

sess = rt.InferenceSession("logreg_iris.onnx", providers=rt.get_available_providers())
input_name = sess.get_inputs()[0].name
label_name = sess.get_outputs()[0].name
pred_onx = sess.run([label_name], {input_name: X_test.astype(numpy.float32)})[0]
print("part 1: labels equal to scikit-learn's:", bool((pred_onx == clr.predict(X_test)).all()))
prob_name = sess.get_outputs()[1].name
prob_rt = sess.run([prob_name], {input_name: X_test[:2].astype(numpy.float32)})[0]
print("part 1: probabilities of the first two test rows:", prob_rt)


# ---- part 2: the backend tutorial on onnxruntime's logreg_iris.onnx --------------------------
def shipped_logreg_iris() -> onnx.ModelProto:
    try:
        from onnxruntime import datasets
        return onnx.load(datasets.get_example("logreg_iris.onnx"))
    except ImportError:   # the same model, from its attributes (OnnxMLTools 1.2 output)
        coef = [0.385741144, 1.38054061, -2.13145, -0.992804825, 0.642774522, -1.7489388,
                0.515096605, -1.40534759, -1.72411919, -1.15951371, 2.24788475, 2.42839146]
        nodes = [
            helper.make_node("LinearClassifier", ["float_input"], ["label", "probability_tensor"],
                             domain="ai.onnx.ml", classlabels_ints=[0, 1, 2], coefficients=coef,
                             intercepts=[0.2496292, 0.582027793, -0.941616654], multi_class=0,
                             post_transform="LOGISTIC"),
            helper.make_node("Normalizer", ["probability_tensor"], ["probabilities"], domain="ai.onnx.ml",
                             norm="L1"),
            helper.make_node("ZipMap", ["probabilities"], ["output_probability"], domain="ai.onnx.ml",
                             classlabels_int64s=[0, 1, 2]),
        ]
        seq = onnx.TypeProto()
        seq.sequence_type.elem_type.map_type.key_type = onnx.TensorProto.INT64
        seq.sequence_type.elem_type.map_type.value_type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        g = helper.make_graph(nodes, "logreg_iris",
                              [helper.make_tensor_value_info("float_input", onnx.TensorProto.FLOAT, [3, 2])],
                              [helper.make_tensor_value_info("label", onnx.TensorProto.INT64, [3]),
                               helper.make_value_info("output_probability", seq)])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 7),
                                                   helper.make_opsetid("ai.onnx.ml", 1)], ir_version=3)


model = shipped_logreg_iris()
x = numpy.array([[-1.0, -2.0], [0.0, 0.0], [1.0, 1.0]], dtype=numpy.float32)

sess = rt.InferenceSession(model.SerializeToString())
label, proba = sess.run(None, {sess.get_inputs()[0].name: x})
print("part 2, InferenceSession: label={}".format(label))
print("part 2, InferenceSession: probabilities={}".format({k: round(v, 4) for k, v in proba[0].items()}))

rep = backend.prepare(model, "CPU")
label, proba = rep.run(x)
print("part 2, backend: label={}".format(label))
print("part 2, backend: probabilities={}".format({k: round(v, 4) for k, v in proba[0].items()}))
