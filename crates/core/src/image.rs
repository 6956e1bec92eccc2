//! Encoded images (screenshots) shared cheaply between history, events and
//! requests.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::coords::Size;

/// The encoding of an [`Image`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// PNG (lossless).
    Png,
    /// JPEG (lossy, smaller).
    Jpeg,
}

impl ImageFormat {
    /// The MIME type (`image/png`).
    pub fn mime(&self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
        }
    }

    /// The usual file extension (`png`, `jpg`).
    pub fn extension(&self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpg",
        }
    }
}

/// An encoded image. The bytes are reference-counted so the same screenshot
/// can sit in wire history, semantic history and an event without copies; in
/// JSON the bytes are standard base64 in `data`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// Encoding.
    pub format: ImageFormat,
    /// Pixel width.
    pub width: u32,
    /// Pixel height.
    pub height: u32,
    /// The encoded bytes.
    #[serde(serialize_with = "ser_b64", deserialize_with = "de_b64")]
    pub data: Arc<[u8]>,
}

impl Image {
    /// Wraps encoded bytes.
    pub fn new(format: ImageFormat, width: u32, height: u32, data: impl Into<Arc<[u8]>>) -> Self {
        Self {
            format,
            width,
            height,
            data: data.into(),
        }
    }

    /// Pixel size.
    pub fn size(&self) -> Size {
        Size::new(self.width, self.height)
    }

    /// The bytes as standard base64 (what providers want in requests).
    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.data)
    }

    /// A `data:` URL of the image.
    pub fn to_data_url(&self) -> String {
        format!("data:{};base64,{}", self.format.mime(), self.to_base64())
    }
}

impl fmt::Debug for Image {
    // Never dump kilobytes of bytes into logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Image")
            .field("format", &self.format)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("bytes", &self.data.len())
            .finish()
    }
}

fn ser_b64<S: Serializer>(data: &Arc<[u8]>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
}

fn de_b64<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<[u8]>, D::Error> {
    let s = String::deserialize(d)?;
    base64::engine::general_purpose::STANDARD
        .decode(s.as_bytes())
        .map(Arc::from)
        .map_err(|e| serde::de::Error::custom(format!("image data is not valid base64: {e}")))
}
