// Keeps ringlm_convert non-empty until the converter sources land (issue 2).
namespace ringlm {
namespace conv {
int converter_placeholder() { return 0; }
}  // namespace conv
}  // namespace ringlm
