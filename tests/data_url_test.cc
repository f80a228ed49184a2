// vision/data_url.h: the data: URLs clients send, RFC 4648's base64 vectors, every malformed shape
// refused with a 400, a payload over the bound with a 413, and every other URL refused unfetched.
#include <gtest/gtest.h>

#include <string>

#include "vision/data_url.h"
#include "vision/image_error.h"

namespace rocket {
namespace {

std::string text(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

ImageError refusal_of(std::string_view url, size_t max_bytes = 1 << 20) {
  try {
    parse_data_url(url, max_bytes);
  } catch (const ImageError& e) {
    return e;
  }
  ADD_FAILURE() << "parsed without an error: " << url;
  return ImageError(ImageError::Kind::malformed, "");
}

TEST(DataUrl, Base64MatchesRfc4648Vectors) {
  EXPECT_EQ(text(decode_base64("")), "");
  EXPECT_EQ(text(decode_base64("Zg==")), "f");
  EXPECT_EQ(text(decode_base64("Zm8=")), "fo");
  EXPECT_EQ(text(decode_base64("Zm9v")), "foo");
  EXPECT_EQ(text(decode_base64("Zm9vYg==")), "foob");
  EXPECT_EQ(text(decode_base64("Zm9vYmE=")), "fooba");
  EXPECT_EQ(text(decode_base64("Zm9vYmFy")), "foobar");
  // Padding optional, whitespace (wrapped lines) ignored, every byte value carried.
  EXPECT_EQ(text(decode_base64("Zm9vYg")), "foob");
  EXPECT_EQ(text(decode_base64("Zm9v\r\nYmFy\n")), "foobar");
  const std::vector<uint8_t> all = decode_base64("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==");
  ASSERT_EQ(all.size(), 256u);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(all[i], i);
}

TEST(DataUrl, MalformedBase64IsRefused) {
  for (const char* bad : {"Zm9v!", "Z", "Zm9vY", "Zg=", "Zg===", "Zg==Zg==", "Zm9v=", "Zm9-", "Zm9_", "Zg=a"}) {
    try {
      decode_base64(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const ImageError& e) {
      EXPECT_EQ(e.http_status(), 400) << bad;
      EXPECT_NE(std::string(e.what()).find("base64"), std::string::npos) << e.what();
    }
  }
}

TEST(DataUrl, ParsesWhatClientsSend) {
  struct Case {
    const char* url;
    const char* media_type;
    std::string bytes;
  };
  const Case cases[] = {
      {"data:image/png;base64,Zm9vYmFy", "image/png", "foobar"},
      // Scheme and media type case-insensitive; parameters besides base64 tolerated.
      {"DATA:Image/JPEG;Base64,Zm9v", "image/jpeg", "foo"},
      {"data:image/webp;charset=utf-8;name=a.webp;base64,Zm8=", "image/webp", "fo"},
      {"data:;base64,Zg==", "", "f"},
      // Without ;base64 the data is percent-encoded (RFC 2397).
      {"data:image/png,%89PNG%0d%0Ax", "image/png", "\x89PNG\r\nx"},
  };
  for (const Case& c : cases) {
    const DataUrl url = parse_data_url(c.url, 100);
    EXPECT_EQ(url.media_type, c.media_type) << c.url;
    EXPECT_EQ(text(url.bytes), c.bytes) << c.url;
  }
}

TEST(DataUrl, RemoteAndOtherUrlsAreRefusedUnfetched) {
  for (const char* remote : {"https://example.com/cat.png", "http://10.0.0.1/a.jpg", "file:///etc/passwd", "ftp://host/x.webp",
                             "HTTPS://EXAMPLE.COM/x"}) {
    const ImageError e = refusal_of(remote);
    EXPECT_EQ(e.kind(), ImageError::Kind::refused) << remote;
    EXPECT_EQ(e.http_status(), 400);
    EXPECT_NE(std::string(e.what()).find("remote image URLs are not fetched"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("send the image as a data: URL"), std::string::npos) << e.what();
  }
  for (const char* not_url : {"", "iVBORw0KGgo=", "/tmp/a.png", ":data"}) {
    const ImageError e = refusal_of(not_url);
    EXPECT_EQ(e.kind(), ImageError::Kind::refused) << not_url;
    EXPECT_NE(std::string(e.what()).find("data: URL"), std::string::npos) << e.what();
  }
}

TEST(DataUrl, MalformedDataUrlsAreRefused) {
  for (const char* bad : {"data:image/png;base64", "data:image/png;base64,", "data:image/png;base64,Zm9v!", "data:image/png,%8",
                          "data:image/png,%zz"}) {
    const ImageError e = refusal_of(bad);
    EXPECT_EQ(e.kind(), ImageError::Kind::malformed) << bad;
    EXPECT_EQ(e.http_status(), 400);
  }
}

TEST(DataUrl, PayloadsOverTheBoundAre413) {
  // "Zm9vYmFy" is 6 bytes: a bound of 6 passes, 5 does not, in either encoding.
  EXPECT_EQ(parse_data_url("data:image/png;base64,Zm9vYmFy", 6).bytes.size(), 6u);
  EXPECT_EQ(refusal_of("data:image/png;base64,Zm9vYmFy", 5).http_status(), 413);
  EXPECT_EQ(refusal_of("data:image/png;base64,Zm9vYg==", 3).kind(), ImageError::Kind::too_large);
  EXPECT_EQ(parse_data_url("data:image/png,abcdef", 6).bytes.size(), 6u);
  EXPECT_EQ(refusal_of("data:image/png,abcdefg", 6).http_status(), 413);
}

}  // namespace
}  // namespace rocket
