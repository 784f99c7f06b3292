//! The type of an image from its first bytes.

/// The image types accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageType {
    Png,
    Jpeg,
    Gif,
    Webp,
    Bmp,
    Svg,
}

impl ImageType {
    /// The type of `bytes` by magic bytes; SVG by an `<svg` element near the start
    /// (after an optional BOM, XML declaration, comments or doctype). `None` for
    /// anything else.
    pub fn sniff(bytes: &[u8]) -> Option<ImageType> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            return Some(ImageType::Png);
        }
        if bytes.starts_with(b"\xff\xd8\xff") {
            return Some(ImageType::Jpeg);
        }
        if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            return Some(ImageType::Gif);
        }
        if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
            return Some(ImageType::Webp);
        }
        if bytes.len() >= 14 && bytes.starts_with(b"BM") {
            return Some(ImageType::Bmp);
        }
        let head = &bytes[..bytes.len().min(4096)];
        let text = String::from_utf8_lossy(head);
        let text = text.trim_start_matches('\u{feff}').trim_start();
        if (text.starts_with('<')) && text.to_ascii_lowercase().contains("<svg") {
            return Some(ImageType::Svg);
        }
        None
    }

    pub fn mime(self) -> &'static str {
        match self {
            ImageType::Png => "image/png",
            ImageType::Jpeg => "image/jpeg",
            ImageType::Gif => "image/gif",
            ImageType::Webp => "image/webp",
            ImageType::Bmp => "image/bmp",
            ImageType::Svg => "image/svg+xml",
        }
    }

    /// The usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            ImageType::Png => "png",
            ImageType::Jpeg => "jpg",
            ImageType::Gif => "gif",
            ImageType::Webp => "webp",
            ImageType::Bmp => "bmp",
            ImageType::Svg => "svg",
        }
    }

    /// Whether vision providers take this type as it is (JPEG, PNG, GIF, WebP).
    pub fn provider_ready(self) -> bool {
        matches!(
            self,
            ImageType::Png | ImageType::Jpeg | ImageType::Gif | ImageType::Webp
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes_decide() {
        assert_eq!(
            ImageType::sniff(b"\x89PNG\r\n\x1a\n...."),
            Some(ImageType::Png)
        );
        assert_eq!(ImageType::sniff(b"\xff\xd8\xff\xe0"), Some(ImageType::Jpeg));
        assert_eq!(ImageType::sniff(b"GIF89a...."), Some(ImageType::Gif));
        assert_eq!(
            ImageType::sniff(b"RIFF\0\0\0\0WEBPVP8 "),
            Some(ImageType::Webp)
        );
        assert_eq!(
            ImageType::sniff(b"BM\0\0\0\0\0\0\0\0\0\0\0\0"),
            Some(ImageType::Bmp)
        );
        assert_eq!(
            ImageType::sniff(b"<?xml version=\"1.0\"?>\n<svg xmlns=\"x\"/>"),
            Some(ImageType::Svg)
        );
        assert_eq!(ImageType::sniff(b"<html><body>hi</body></html>"), None);
        assert_eq!(ImageType::sniff(b"plain text"), None);
        assert_eq!(ImageType::sniff(b""), None);
    }
}
