//! Images (PNG, JPEG, GIF, WebP) as image content, scaled down to what a
//! model sees: the longest side at most 1,568 px and at most about 1.15
//! megapixels. An image already within both is sent as it is.

use std::io::Cursor;

use base64::Engine;
use image::{ImageFormat, ImageReader};

/// Longest side a model sees.
pub const MAX_SIDE: u32 = 1568;
/// Pixels a model sees.
pub const MAX_PIXELS: u64 = 1_150_000;

/// An image ready to send.
#[derive(Debug)]
pub struct Scaled {
    /// Base64 of the encoded image.
    pub base64: String,
    /// Its MIME type.
    pub mime: &'static str,
    /// The original size.
    pub original: (u32, u32),
    /// The size sent.
    pub sent: (u32, u32),
}

/// The size an image of `w`×`h` is sent at.
pub fn target_size(w: u32, h: u32) -> (u32, u32) {
    let side = f64::from(MAX_SIDE) / f64::from(w.max(h).max(1));
    let area = (MAX_PIXELS as f64 / (f64::from(w.max(1)) * f64::from(h.max(1)))).sqrt();
    let k = side.min(area).min(1.0);
    if k >= 1.0 {
        return (w, h);
    }
    // A hair over the exact product, so 3000 × (1568 / 3000) is 1568, not 1567.
    let scale = |v: u32| (((f64::from(v) * k) + 1e-6).floor() as u32).max(1);
    (scale(w), scale(h))
}

fn mime_of(f: ImageFormat) -> &'static str {
    match f {
        ImageFormat::Png => "image/png",
        ImageFormat::Jpeg => "image/jpeg",
        ImageFormat::Gif => "image/gif",
        ImageFormat::WebP => "image/webp",
        _ => "application/octet-stream",
    }
}

/// Decodes, scales when needed, and encodes an image.
pub fn scale(bytes: &[u8]) -> Result<Scaled, String> {
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| e.to_string())?;
    let format = reader.format().ok_or("not an image format nib reads")?;
    let img = reader
        .decode()
        .map_err(|e| format!("the image does not decode: {e}"))?;
    let (w, h) = (img.width(), img.height());
    let (tw, th) = target_size(w, h);
    let engine = base64::engine::general_purpose::STANDARD;
    if (tw, th) == (w, h) {
        return Ok(Scaled {
            base64: engine.encode(bytes),
            mime: mime_of(format),
            original: (w, h),
            sent: (w, h),
        });
    }
    let small = img.resize(tw, th, image::imageops::FilterType::Triangle);
    let mut out = Cursor::new(Vec::new());
    let (fmt, mime) = if format == ImageFormat::Jpeg {
        (ImageFormat::Jpeg, "image/jpeg")
    } else {
        (ImageFormat::Png, "image/png")
    };
    let small = if fmt == ImageFormat::Jpeg {
        image::DynamicImage::ImageRgb8(small.to_rgb8())
    } else {
        small
    };
    small.write_to(&mut out, fmt).map_err(|e| e.to_string())?;
    Ok(Scaled {
        base64: engine.encode(out.into_inner()),
        mime,
        original: (w, h),
        sent: (small.width(), small.height()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fit_both_bounds() {
        assert_eq!(target_size(800, 600), (800, 600));
        let (w, h) = target_size(4000, 3000);
        assert!(
            w <= MAX_SIDE && h <= MAX_SIDE && u64::from(w) * u64::from(h) <= MAX_PIXELS,
            "{w}x{h}"
        );
        let (w, h) = target_size(3000, 200);
        assert_eq!(w, MAX_SIDE);
        assert!(h >= 100);
    }
}
