//! Bytes to an image within the providers' caps.

use crate::sniff::ImageType;
use base64::Engine;
use image::{DynamicImage, GenericImageView, ImageFormat, ImageReader};
use std::fmt;
use std::io::Cursor;

/// The bounds an image is brought within before it reaches a model.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Longest side in pixels (providers refuse 8000 and more).
    pub max_side: u32,
    /// Longest data URL in bytes (providers refuse a 5 MB base64 image; this leaves
    /// headroom).
    pub max_data_url_bytes: usize,
    /// Largest input accepted at all.
    pub max_input_bytes: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_side: 7900,
            max_data_url_bytes: 4 * 1024 * 1024,
            max_input_bytes: crate::source::MAX_INGEST_BYTES,
        }
    }
}

/// Why an image could not be loaded or prepared. The texts are stable and meant for
/// the model to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    /// Not one of the accepted types.
    NotAnImage(String),
    /// Over a size limit, even after downscaling.
    TooLarge(String),
    /// The type is known but the content does not decode.
    Corrupt(String),
    /// The source could not be read (network, refusal, status).
    Source(String),
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::NotAnImage(why)
            | ImageError::TooLarge(why)
            | ImageError::Corrupt(why)
            | ImageError::Source(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ImageError {}

/// An image ready for a vision model.
#[derive(Clone)]
pub struct PreparedImage {
    /// Type of [`PreparedImage::bytes`] (always one providers accept).
    pub image_type: ImageType,
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// Type and size of what was given.
    pub source_type: ImageType,
    pub source_bytes: usize,
    pub source_width: u32,
    pub source_height: u32,
    /// Whether the pixels were scaled down to fit the caps.
    pub resized: bool,
}

impl fmt::Debug for PreparedImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedImage")
            .field("image_type", &self.image_type)
            .field("bytes", &self.bytes.len())
            .field("width", &self.width)
            .field("height", &self.height)
            .field("source_type", &self.source_type)
            .field("source_bytes", &self.source_bytes)
            .field("resized", &self.resized)
            .finish()
    }
}

impl PreparedImage {
    pub fn mime(&self) -> &'static str {
        self.image_type.mime()
    }

    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.bytes)
    }

    /// `data:<mime>;base64,<bytes>`.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime(), self.base64())
    }
}

fn data_url_len(mime: &str, bytes: usize) -> usize {
    "data:;base64,".len() + mime.len() + bytes.div_ceil(3) * 4
}

/// The raster format of `ty` (`None` for SVG).
fn raster_format(ty: ImageType) -> Option<ImageFormat> {
    Some(match ty {
        ImageType::Png => ImageFormat::Png,
        ImageType::Jpeg => ImageFormat::Jpeg,
        ImageType::Gif => ImageFormat::Gif,
        ImageType::Webp => ImageFormat::WebP,
        ImageType::Bmp => ImageFormat::Bmp,
        ImageType::Svg => return None,
    })
}

fn decode(bytes: &[u8], ty: ImageType) -> Result<DynamicImage, ImageError> {
    let Some(format) = raster_format(ty) else {
        return rasterize_svg(bytes);
    };
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(1024 * 1024 * 1024);
    reader.limits(limits);
    reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => ImageError::TooLarge(format!(
            "The {} image is too large to decode ({e}).",
            ty.mime()
        )),
        other => ImageError::Corrupt(format!(
            "The {} image could not be decoded: {other}",
            ty.mime()
        )),
    })
}

pub(crate) fn dimensions(bytes: &[u8], ty: ImageType) -> Option<(u32, u32)> {
    ImageReader::with_format(Cursor::new(bytes), raster_format(ty)?)
        .into_dimensions()
        .ok()
}

/// SVG to pixels at its own size, or smaller so no side exceeds 7900 pixels. Text is
/// not drawn (no fonts are loaded) and nothing outside the document is fetched or
/// read.
fn rasterize_svg(bytes: &[u8]) -> Result<DynamicImage, ImageError> {
    use resvg::{tiny_skia, usvg};
    let tree = usvg::Tree::from_data(bytes, &usvg::Options::default())
        .map_err(|e| ImageError::Corrupt(format!("The SVG image could not be read: {e}")))?;
    let size = tree.size();
    let (w, h) = (size.width().max(1.0), size.height().max(1.0));
    let scale = (7900.0 / w.max(h)).min(1.0);
    let (pw, ph) = (
        ((w * scale).round() as u32).max(1),
        ((h * scale).round() as u32).max(1),
    );
    let mut pixmap = tiny_skia::Pixmap::new(pw, ph).ok_or_else(|| {
        ImageError::TooLarge(format!("The SVG image is too large to draw ({pw}x{ph})."))
    })?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    let mut rgba = Vec::with_capacity((pw * ph * 4) as usize);
    for pixel in pixmap.pixels() {
        let c = pixel.demultiply();
        rgba.extend_from_slice(&[c.red(), c.green(), c.blue(), c.alpha()]);
    }
    image::RgbaImage::from_raw(pw, ph, rgba)
        .map(DynamicImage::ImageRgba8)
        .ok_or_else(|| ImageError::Corrupt("The SVG image could not be drawn.".into()))
}

fn encode(img: &DynamicImage, ty: ImageType, quality: u8) -> Result<Vec<u8>, ImageError> {
    let mut out = Vec::new();
    let result = match ty {
        ImageType::Jpeg => {
            let rgb = img.to_rgb8();
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality).encode(
                rgb.as_raw(),
                rgb.width(),
                rgb.height(),
                image::ExtendedColorType::Rgb8,
            )
        }
        _ => {
            let img = match img {
                DynamicImage::ImageRgb8(_)
                | DynamicImage::ImageRgba8(_)
                | DynamicImage::ImageLuma8(_)
                | DynamicImage::ImageLumaA8(_) => img.clone(),
                other => DynamicImage::ImageRgba8(other.to_rgba8()),
            };
            img.write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
        }
    };
    result.map_err(|e| ImageError::Corrupt(format!("The image could not be re-encoded: {e}")))?;
    Ok(out)
}

/// Brings `bytes` within `caps`. Types providers accept that are already within the
/// caps pass through byte for byte; BMP becomes PNG and SVG is drawn into a PNG;
/// anything over a cap is scaled down (its longest side to `caps.max_side`, then
/// halved as often as needed, JPEG quality 85, 70, 50 at each size) and re-encoded:
/// PNG, BMP and SVG sources as PNG, the others as JPEG. Only the first frame of an
/// animation that had to be re-encoded is kept.
pub fn prepare(bytes: &[u8], caps: &Caps) -> Result<PreparedImage, ImageError> {
    if bytes.len() > caps.max_input_bytes {
        return Err(ImageError::TooLarge(format!(
            "The image is {:.1} MB; the limit is {} MB.",
            bytes.len() as f64 / (1024.0 * 1024.0),
            caps.max_input_bytes / (1024 * 1024)
        )));
    }
    let source_type = ImageType::sniff(bytes).ok_or_else(|| {
        ImageError::NotAnImage(
            "The content is not an image of a supported type (PNG, JPEG, GIF, WebP, BMP, SVG)."
                .into(),
        )
    })?;
    if source_type.provider_ready() {
        if let Some((w, h)) = dimensions(bytes, source_type) {
            if w.max(h) <= caps.max_side
                && data_url_len(source_type.mime(), bytes.len()) <= caps.max_data_url_bytes
            {
                return Ok(PreparedImage {
                    image_type: source_type,
                    bytes: bytes.to_vec(),
                    width: w,
                    height: h,
                    source_type,
                    source_bytes: bytes.len(),
                    source_width: w,
                    source_height: h,
                    resized: false,
                });
            }
        }
    }
    let mut img = decode(bytes, source_type)?;
    let (source_width, source_height) = img.dimensions();
    let out_type = match source_type {
        ImageType::Png | ImageType::Bmp | ImageType::Svg => ImageType::Png,
        _ => ImageType::Jpeg,
    };
    let qualities: &[u8] = if out_type == ImageType::Jpeg {
        &[85, 70, 50]
    } else {
        &[0]
    };
    let mut resized = false;
    if img.width().max(img.height()) > caps.max_side {
        img = img.resize(
            caps.max_side,
            caps.max_side,
            image::imageops::FilterType::Triangle,
        );
        resized = true;
    }
    for round in 0..8 {
        if round > 0 {
            let (w, h) = img.dimensions();
            if w.max(h) <= 64 {
                break;
            }
            img = img.resize(
                (w / 2).max(1),
                (h / 2).max(1),
                image::imageops::FilterType::Triangle,
            );
            resized = true;
        }
        for &quality in qualities {
            let encoded = encode(&img, out_type, quality)?;
            if data_url_len(out_type.mime(), encoded.len()) <= caps.max_data_url_bytes {
                return Ok(PreparedImage {
                    image_type: out_type,
                    bytes: encoded,
                    width: img.width(),
                    height: img.height(),
                    source_type,
                    source_bytes: bytes.len(),
                    source_width,
                    source_height,
                    resized,
                });
            }
        }
    }
    Err(ImageError::TooLarge(format!(
        "The image could not be brought under {} MB even after downscaling.",
        caps.max_data_url_bytes / (1024 * 1024)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(w: u32, h: u32) -> DynamicImage {
        let mut state = 0x2545_f491_u32;
        DynamicImage::ImageRgb8(image::RgbImage::from_fn(w, h, |_, _| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            image::Rgb([state as u8, (state >> 8) as u8, (state >> 16) as u8])
        }))
    }

    fn encoded(img: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Vec::new();
        img.write_to(&mut Cursor::new(&mut out), format).unwrap();
        out
    }

    #[test]
    fn small_images_pass_through_unchanged() {
        let img = noise(40, 30);
        for (format, ty) in [
            (ImageFormat::Png, ImageType::Png),
            (ImageFormat::Jpeg, ImageType::Jpeg),
            (ImageFormat::Gif, ImageType::Gif),
            (ImageFormat::WebP, ImageType::Webp),
        ] {
            let bytes = encoded(&img, format);
            let prepared = prepare(&bytes, &Caps::default()).unwrap();
            assert_eq!(prepared.image_type, ty);
            assert_eq!(prepared.bytes, bytes, "{ty:?} changed");
            assert_eq!((prepared.width, prepared.height), (40, 30));
            assert!(!prepared.resized);
        }
    }

    #[test]
    fn bmp_becomes_png_and_svg_is_drawn() {
        let bytes = encoded(&noise(20, 10), ImageFormat::Bmp);
        let prepared = prepare(&bytes, &Caps::default()).unwrap();
        assert_eq!(prepared.image_type, ImageType::Png);
        assert_eq!(prepared.source_type, ImageType::Bmp);
        assert_eq!((prepared.width, prepared.height), (20, 10));

        let svg = br##"<svg xmlns="http://www.w3.org/2000/svg" width="30" height="20"><rect width="30" height="20" fill="#ff0000"/></svg>"##;
        let prepared = prepare(svg, &Caps::default()).unwrap();
        assert_eq!(prepared.image_type, ImageType::Png);
        let drawn = image::load_from_memory(&prepared.bytes).unwrap().to_rgba8();
        assert_eq!(drawn.dimensions(), (30, 20));
        assert_eq!(drawn.get_pixel(15, 10).0, [255, 0, 0, 255]);
    }

    #[test]
    fn tall_images_are_scaled_to_the_side_cap() {
        let bytes = encoded(&noise(8, 9000), ImageFormat::Png);
        let prepared = prepare(&bytes, &Caps::default()).unwrap();
        assert!(prepared.resized);
        assert_eq!(prepared.height, 7900);
        assert_eq!(prepared.image_type, ImageType::Png);
    }

    #[test]
    fn heavy_images_are_scaled_under_the_byte_cap() {
        let bytes = encoded(&noise(1500, 1500), ImageFormat::Png);
        let caps = Caps {
            max_data_url_bytes: 1024 * 1024,
            ..Caps::default()
        };
        assert!(bytes.len() > caps.max_data_url_bytes);
        let prepared = prepare(&bytes, &caps).unwrap();
        assert!(prepared.resized);
        assert!(prepared.data_url().len() <= caps.max_data_url_bytes);
        assert!(prepared.width < 1500);
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let err = prepare(b"hello world", &Caps::default()).unwrap_err();
        assert!(matches!(err, ImageError::NotAnImage(_)), "{err}");
        let err = prepare(b"\x89PNG\r\n\x1a\nbroken", &Caps::default()).unwrap_err();
        assert!(matches!(err, ImageError::Corrupt(_)), "{err}");
    }
}
