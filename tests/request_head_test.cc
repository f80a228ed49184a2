// check_request_head (src/http/request_head.h): what a request head declares about its body, before
// the body is read. e2e.hostile drives the same through a real server.
#include <gtest/gtest.h>

#include "http/request_head.h"

namespace rocket {
namespace {

constexpr size_t kLimit = 1000;

int status(std::string_view headers) {
  return check_request_head(std::string("POST /v1/completions HTTP/1.1\r\n") + std::string(headers) + "\r\n", kLimit).status;
}

TEST(RequestHead, BodyLengthWithinTheLimitPasses) {
  EXPECT_EQ(status("Host: x\r\nContent-Length: 1000\r\n"), 0);
  EXPECT_EQ(status("Host: x\r\n"), 0);
  EXPECT_EQ(status("content-length:   12 \r\nContent-Length: 12\r\n"), 0);  // the same twice
  EXPECT_EQ(status("Content-Encoding: identity\r\nContent-Length: 5\r\n"), 0);
  EXPECT_EQ(status("Transfer-Encoding: chunked\r\n"), 0);  // httplib counts a chunked body against the limit
}

TEST(RequestHead, OverTheLimitIs413BeforeTheBody) {
  const HeadVerdict v = check_request_head("POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", kLimit);
  EXPECT_EQ(v.status, 413);
  EXPECT_EQ(v.code, "request_too_large");
  EXPECT_NE(v.message.find("1000 bytes"), std::string::npos);
  EXPECT_EQ(status("Content-Length: 9999999999999999999\r\n"), 413);
}

TEST(RequestHead, MalformedLengthsAre400) {
  for (const char* bad : {"-5", "", "12a", "0x10", "1 2", "+7", "99999999999999999999", "1e3"})
    EXPECT_EQ(status(std::string("Content-Length: ") + bad + "\r\n"), 400) << bad;
  EXPECT_EQ(status("Content-Length: 10\r\nContent-Length: 99\r\n"), 400);
}

TEST(RequestHead, CompressedBodiesAre415AndTheValueIsQuotedSafely) {
  for (const char* enc : {"gzip", " BR ", "deflate", "gzip, identity", "x-custom"}) {
    const HeadVerdict v = check_request_head(std::string("POST / HTTP/1.1\r\nCONTENT-ENCODING:") + enc + "\r\n\r\n", kLimit);
    EXPECT_EQ(v.status, 415) << enc;
    EXPECT_EQ(v.code, "unsupported_content_encoding");
  }
  const HeadVerdict v = check_request_head("POST / HTTP/1.1\r\nContent-Encoding: \xff\xfe\x01zz\r\n\r\n", kLimit);
  EXPECT_EQ(v.status, 415);
  EXPECT_NE(v.message.find("'???zz'"), std::string::npos) << v.message;  // JSON-safe: no raw bytes echoed
}

TEST(RequestHead, TheRequestLineIsNotAHeader) {
  EXPECT_EQ(check_request_head("POST /Content-Length:99999999 HTTP/1.1\r\n\r\n", kLimit).status, 0);
}

}  // namespace
}  // namespace rocket
