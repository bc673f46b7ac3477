//! Importers: model folders of other ecosystems read into a [`ModelFile`]
//! (the converter's input). Unlike the containers in [`crate::formats`], an
//! import maps another project's model layout (names, configuration) onto
//! ours.
//!
//! [`ModelFile`]: crate::formats::ModelFile

pub mod hf;
