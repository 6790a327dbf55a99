// Fixture of longest-functions.test, not compiled, its lines counted as they
// stand: functions of known lengths among constructs that fool brace counts.
// clang-format off

namespace outer {
namespace {

// A brace in a comment: {
/* and in a block comment: { { */
int commentsAndStrings() {
  const char *s = "}}} \" {";
  char c = '{';
  char d = '\'';
  long big = 1'000'000;
  std::string raw = R"x(a "quoted" } brace
  over two lines )x";
  return s[0] + c + d + big + raw.size();
}

} // namespace

struct Widget : Base {
  Widget(int a) : a_(a), b_{a} {
    (void)a;
  }
  bool operator<(const Widget &o) const { return a_ < o.a_; }
  int operator()(int x) const {
    auto twice = [&](int y) {
      return 2 * y;
    };
    return twice(x);
  }
  int a_, b_;
};

template <typename T>
auto Widget::trailing(T x) -> decltype(x + 1) {
  return x + 1;
}

enum class Kind { A, B };
static const int table[] = {1, 2, 3};
static auto lambda = [](int x) {
  if (x) {
    return 1;
  }
  return 0;
};

#ifdef ONE_WAY
int unbalanced(int a) {
#else
int unbalanced() {
  int a = 0;
#endif
  return a;
}

__global__ void __launch_bounds__(256)
    kernel(const float *x, float *y) {
  y[0] = x[0];
}

TEST(Suite, Name) {
  EXPECT_TRUE(true);
}

} // namespace outer
