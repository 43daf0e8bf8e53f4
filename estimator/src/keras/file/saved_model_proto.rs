//! The protos a tf.keras SavedModel is read with, as prost structs (no protoc): Keras's
//! `SavedMetadata` (`keras_metadata.pb`) and TF's `TrackableObjectGraph` (the checkpoint's
//! `_CHECKPOINTABLE_OBJECT_GRAPH` entry). Only the fields read are declared.

/// `keras/protobuf/saved_metadata.proto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SavedMetadata {
    #[prost(message, repeated, tag = "1")]
    pub(crate) nodes: Vec<SavedObject>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SavedObject {
    /// The node's id in the object graph.
    #[prost(int32, tag = "2")]
    pub(crate) node_id: i32,
    /// `root`, `root.layer_with_weights-0`, `root.layer-1.layer_with_weights-0`, ...
    #[prost(string, tag = "3")]
    pub(crate) node_path: String,
    /// `_tf_keras_layer`, `_tf_keras_network`, `_tf_keras_sequential`, `_tf_keras_model`, ...
    #[prost(string, tag = "4")]
    pub(crate) identifier: String,
    /// JSON: the object's name, class, config (and the root's `training_config`).
    #[prost(string, tag = "5")]
    pub(crate) metadata: String,
}

/// `tensorflow/core/protobuf/trackable_object_graph.proto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrackableObjectGraph {
    #[prost(message, repeated, tag = "1")]
    pub(crate) nodes: Vec<TrackableObject>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TrackableObject {
    #[prost(message, repeated, tag = "1")]
    pub(crate) children: Vec<ObjectReference>,
    #[prost(message, repeated, tag = "2")]
    pub(crate) attributes: Vec<SerializedTensor>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ObjectReference {
    #[prost(int32, tag = "1")]
    pub(crate) node_id: i32,
    #[prost(string, tag = "2")]
    pub(crate) local_name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SerializedTensor {
    /// `VARIABLE_VALUE` for a variable's value.
    #[prost(string, tag = "1")]
    pub(crate) name: String,
    #[prost(string, tag = "3")]
    pub(crate) checkpoint_key: String,
}
