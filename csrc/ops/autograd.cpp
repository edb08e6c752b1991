// Autograd for the gemm ops: a torch::autograd::Function per op, registered at the Autograd key
// as torch's own ops are, so a forward and backward cost no Python. The backwards, and forward-mode
// AD's tangents, call the ops themselves through the dispatcher: gradients run on our kernels, and
// double backward works.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>

#include "ops/mm_common.h"

namespace torch_gemm {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using ProductFn = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view);
using RowSumFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                    c10::string_view);
using LinearFn = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                            c10::string_view);
using WeightGradFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, bool,
                                                        c10::string_view);

// The ops' handles, looked up once: the backwards call the ops through the whole dispatcher
// (autograd included, for double backward), the forwards below autograd.
const c10::TypedOperatorHandle<ProductFn>& mm_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(kMmTiled, "").typed<ProductFn>();
  return op;
}
const c10::TypedOperatorHandle<ProductFn>& bmm_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(kBmmTiled, "").typed<ProductFn>();
  return op;
}
const c10::TypedOperatorHandle<RowSumFn>& row_sum_op() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow(kMmTiledRowSum, "").typed<RowSumFn>();
  return op;
}
const c10::TypedOperatorHandle<LinearFn>& linear_op() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(kLinearTiled, "").typed<LinearFn>();
  return op;
}
const c10::TypedOperatorHandle<WeightGradFn>& weight_grad_op() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow(kLinearTiledWeightGrad, "").typed<WeightGradFn>();
  return op;
}

// A kernel name other than "auto" travels to the backward in saved_data, so the gradients run on
// the rung the forward ran on; "auto" (most calls) is not stored, which saves the string's
// allocations per node.
constexpr const char* kKernelKey = "kernel";
constexpr const char* kAutoKernel = "auto";
constexpr const char* kHasBiasKey = "has_bias";

void save_kernel(AutogradContext* ctx, c10::string_view kernel) {
  if (kernel != kAutoKernel) ctx->saved_data[kKernelKey] = std::string(kernel);
}

std::string saved_kernel(AutogradContext* ctx) {
  const auto found = ctx->saved_data.find(kKernelKey);
  return found == ctx->saved_data.end() ? std::string(kAutoKernel) : found->second.toStringRef();
}

// Only what a needed gradient reads is saved: dA = dC·Bᵀ reads B, dB = Aᵀ·dC reads A.
void save_operands(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                   c10::string_view kernel) {
  save_kernel(ctx, kernel);
  ctx->save_for_backward({b.requires_grad() ? a : at::Tensor(), a.requires_grad() ? b : at::Tensor()});
}

// Which of a backward's two products goes first: the one that reads the larger of the forward's
// operands (dB reads A, dA reads B). That operand is the one worth finding in L2 after the
// forward (the smaller is cheap either way), and the other product writes a result of its size,
// which would evict it. Measured on the models grid (benchmarks/NOTES.md, session 50). Global
// sizes, so that every rank of a DTensor program takes the same order; under symbolic sizes
// (torch.compile's tracing) a fixed order, which puts no guard on the graph and leaves the
// scheduling to the compiler.
bool grad_b_first(const at::Tensor& a, const at::Tensor& b) {
  if (a.unsafeGetTensorImpl()->has_symbolic_sizes_strides() ||
      b.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    return true;
  }
  return a.numel() >= b.numel();
}

// Runs a backward's product for A's gradient and the one for B's (each doing nothing where its
// gradient is not needed) in grad_b_first's order; `both` says both are needed, and so both
// operands saved.
template <typename ProductA, typename ProductB>
void run_products(bool both, const at::Tensor& a, const at::Tensor& b, ProductA&& product_a,
                  ProductB&& product_b) {
  if (both && grad_b_first(a, b)) {
    product_b();
    product_a();
  } else {
    product_a();
    product_b();
  }
}

// C = A·B for mm_tiled and bmm_tiled (per batch element): dA = dC·Bᵀ and dB = Aᵀ·dC through the
// op itself, the transposes passed as strided views (no copies).
template <const c10::TypedOperatorHandle<ProductFn>& (*kOp)()>
struct ProductFunction : torch::autograd::Function<ProductFunction<kOp>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            c10::string_view kernel) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    save_operands(ctx, a, b, kernel);
    return kOp().call(a, b, kernel);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::string kernel = saved_kernel(ctx);
    const at::Tensor& grad = grads[0];
    const bool need_a = ctx->needs_input_grad(0), need_b = ctx->needs_input_grad(1);
    at::Tensor grad_a, grad_b;
    run_products(
        need_a && need_b, saved[0], saved[1],
        [&] { if (need_a) grad_a = kOp().call(grad, saved[1].mT(), kernel); },
        [&] { if (need_b) grad_b = kOp().call(saved[0].mT(), grad, kernel); });
    return {grad_a, grad_b, at::Tensor()};
  }
};

// (C, r) = (A·B, A summed over k): dA = dC·Bᵀ + dr broadcast over k, dB = Aᵀ·dC. The gradient of
// an output that does not reach the loss arrives undefined (grads not materialized), and no
// product is computed for it.
struct RowSumFunction : torch::autograd::Function<RowSumFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                               c10::string_view kernel) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    save_operands(ctx, a, b, kernel);
    ctx->set_materialize_grads(false);
    auto [product, row_sum] = row_sum_op().call(a, b, kernel);
    return {product, row_sum};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::string kernel = saved_kernel(ctx);
    const at::Tensor& grad_product = grads[0];
    const at::Tensor& grad_row_sum = grads[1];
    const bool need_a = ctx->needs_input_grad(0);
    const bool need_b = ctx->needs_input_grad(1) && grad_product.defined();
    at::Tensor grad_a, grad_b;
    run_products(
        need_a && need_b, saved[0], saved[1],
        [&] {
          if (!need_a) return;
          if (grad_product.defined()) grad_a = mm_op().call(grad_product, saved[1].mT(), kernel);
          if (grad_row_sum.defined()) {
            const at::Tensor spread = grad_row_sum.unsqueeze(1).expand({-1, saved[1].size(0)});
            grad_a = grad_a.defined() ? grad_a + spread : spread;
          }
        },
        [&] { if (need_b) grad_b = mm_op().call(saved[0].mT(), grad_product, kernel); });
    return {grad_a, grad_b, at::Tensor()};
  }
};


// y = x·Wᵀ + b over the rows of x (its leading dimensions flattened):
//   dx = grad·W   (linear_tiled with Wᵀ as its weight: a strided view, the leading dims kept),
//   dW = gradᵀ·x  (linear_tiled_weight_grad: grad and x as the forward saw them, their rows
//                  flattened inside the op, below DTensor),
//   db = grad summed over the rows, i.e. the row sums of dW's operand gradᵀ: where dW is needed
//        too, the same call computes both (in one launch where the kernel fuses the sum), else
//        torch sums grad.
struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, c10::string_view kernel) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    save_kernel(ctx, kernel);
    // needs_input_grad counts the defined tensors only: bias is edge 2 where it is one. Stored
    // only where there is one (no map entry per node otherwise).
    if (bias.has_value() && bias->defined()) ctx->saved_data[kHasBiasKey] = true;
    ctx->save_for_backward(
        {weight.requires_grad() ? x : at::Tensor(), x.requires_grad() ? weight : at::Tensor()});
    return linear_op().call(x, weight, bias, kernel);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::string kernel = saved_kernel(ctx);
    const at::Tensor& grad = grads[0];
    const bool need_x = ctx->needs_input_grad(0), need_weight = ctx->needs_input_grad(1);
    const bool need_bias = ctx->saved_data.count(kHasBiasKey) > 0 && ctx->needs_input_grad(2);
    at::Tensor grad_x, grad_weight, grad_bias;
    // dx reads W, dW reads x: x is A of run_products' order, W's transpose B.
    run_products(
        need_x && need_weight, saved[0], saved[1],
        [&] { if (need_x) grad_x = linear_op().call(grad, saved[1].mT(), std::nullopt, kernel); },
        [&] {
          if (need_weight) {
            // Without need_bias the second result is the op's empty placeholder, not a gradient.
            auto [weight_grad, bias_grad] =
                weight_grad_op().call(grad, saved[0], need_bias, kernel);
            grad_weight = std::move(weight_grad);
            if (need_bias) grad_bias = std::move(bias_grad);
          } else if (need_bias) {
            grad_bias = sum_leading_dims(grad);
          }
        });
    return {grad_x, grad_weight, grad_bias, at::Tensor()};
  }
};

// (dW, db) = (Σ_r grad[r]ᵀ⊗x[r], Σ_r grad[r]), linear in grad and (dW) in x, so for incoming gdW
// and gdb: d grad = x·gdWᵀ + gdb = linear_tiled(x, gdW, gdb), d x = grad·gdW = linear_tiled(grad,
// gdWᵀ) (a strided view), both keeping the leading dimensions. db exists only where `bias`.
struct WeightGradFunction : torch::autograd::Function<WeightGradFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& grad, const at::Tensor& x,
                               bool bias, c10::string_view kernel) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    save_kernel(ctx, kernel);
    if (bias) ctx->saved_data[kHasBiasKey] = true;
    ctx->save_for_backward({x.requires_grad() ? grad : at::Tensor(), grad.requires_grad() ? x : at::Tensor()});
    ctx->set_materialize_grads(false);
    auto [grad_weight, grad_bias] = weight_grad_op().call(grad, x, bias, kernel);
    return {grad_weight, grad_bias};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const std::string kernel = saved_kernel(ctx);
    const at::Tensor& gdw = grads[0];
    const bool bias = ctx->saved_data.count(kHasBiasKey) > 0;
    const std::optional<at::Tensor> gdb =
        bias && grads[1].defined() ? std::optional<at::Tensor>(grads[1]) : std::nullopt;
    at::Tensor d_grad, d_x;
    if (ctx->needs_input_grad(0)) {
      const at::Tensor& x = saved[1];
      if (gdw.defined()) {
        d_grad = linear_op().call(x, gdw, gdb, kernel);
      } else if (gdb.has_value()) {
        at::DimVector shape(x.sizes().begin(), x.sizes().end() - 1);
        shape.push_back(gdb->size(0));
        d_grad = gdb->expand(shape);
      }
    }
    if (ctx->needs_input_grad(1) && gdw.defined()) {
      d_x = linear_op().call(saved[0], gdw.mT(), std::nullopt, kernel);
    }
    return {d_grad, d_x, at::Tensor(), at::Tensor()};
  }
};

// Forward-mode AD (torch.autograd.forward_ad, torch.func.jvp). torch's C++ Function API has no jvp
// (it refuses inputs that carry a tangent), so where one does, the op runs as usual with forward AD
// switched off around it (its node saves the inputs themselves, tangents and all, so that a
// backward run under forward AD differentiates through them), and the outputs' tangents, linear in
// the inputs', are computed here by the ops themselves on the primals (_fw_primal: views without
// the tangent, differentiable back to the inputs) and set. Level 0 is the only one a kernel reads,
// as in torch's own kernels (functorch nests levels by wrapping them). An undefined tangent stands
// for zero.
constexpr uint64_t kFwLevel = 0;

at::Tensor tangent(const at::Tensor& t) { return t.defined() ? t._fw_grad(kFwLevel) : at::Tensor(); }

at::Tensor tangent(const std::optional<at::Tensor>& t) {
  return t.has_value() ? tangent(*t) : at::Tensor();
}

// t without its tangent (t itself where it has none).
at::Tensor primal(const at::Tensor& t, const at::Tensor& t_tangent) {
  return t_tangent.defined() ? t._fw_primal(kFwLevel) : t;
}

at::Tensor add_tangent(const at::Tensor& sum, const at::Tensor& term) {
  return sum.defined() ? sum + term : term;
}

// run() with forward AD off: the tangents are invisible to it (read as undefined).
template <typename Run>
auto without_forward_ad(Run&& run) {
  const c10::AutoFwGradMode forward_ad_off(false);
  return run();
}

void set_tangent(const at::Tensor& output, const at::Tensor& output_tangent) {
  if (output_tangent.defined()) output._set_fw_grad(output_tangent, kFwLevel, /*is_inplace_op=*/false);
}

// The tensor arguments a call needs, checked before autograd reads them, so that one given as None
// is refused with the op's message whether or not the other requires grad.
void check_both_defined(const char* op, const at::Tensor& first, const char* first_name,
                        const at::Tensor& second, const char* second_name) {
  check_defined(op, first, first_name);
  check_defined(op, second, second_name);
}

// Whether a call records a node: grad mode on and an input that requires grad. Where none is
// recorded (inference, no_grad) the op runs below autograd without building a Function, as
// torch's generated autograd kernels skip their graph work.
bool records_graph(const at::Tensor& a, const at::Tensor& b,
                   const std::optional<at::Tensor>& c = std::nullopt) {
  return c10::GradMode::is_enabled() &&
         (a.requires_grad() || b.requires_grad() || (c.has_value() && c->defined() && c->requires_grad()));
}

template <const c10::TypedOperatorHandle<ProductFn>& (*kOp)()>
at::Tensor product_autograd(const at::Tensor& a, const at::Tensor& b, c10::string_view kernel) {
  check_both_defined(kOp == &mm_op ? kMmTiled : kBmmTiled, a, "a", b, "b");
  const at::Tensor ta = tangent(a), tb = tangent(b);
  if (C10_UNLIKELY(ta.defined() || tb.defined())) {  // dC = dA·B + A·dB
    at::Tensor out = without_forward_ad([&] { return product_autograd<kOp>(a, b, kernel); });
    const at::Tensor ap = primal(a, ta), bp = primal(b, tb);
    at::Tensor t_out;
    if (ta.defined()) t_out = kOp().call(ta, bp, kernel);
    if (tb.defined()) t_out = add_tangent(t_out, kOp().call(ap, tb, kernel));
    set_tangent(out, t_out);
    return out;
  }
  if (records_graph(a, b)) return ProductFunction<kOp>::apply(a, b, kernel);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return kOp().call(a, b, kernel);
}

std::tuple<at::Tensor, at::Tensor> mm_tiled_row_sum_autograd(const at::Tensor& a, const at::Tensor& b,
                                                             c10::string_view kernel) {
  check_both_defined(kMmTiledRowSum, a, "a", b, "b");
  const at::Tensor ta = tangent(a), tb = tangent(b);
  if (C10_UNLIKELY(ta.defined() || tb.defined())) {  // (dA·B + A·dB, dA summed over k)
    auto outputs = without_forward_ad([&] { return mm_tiled_row_sum_autograd(a, b, kernel); });
    const at::Tensor ap = primal(a, ta), bp = primal(b, tb);
    at::Tensor t_product, t_row_sum;
    if (ta.defined()) std::tie(t_product, t_row_sum) = row_sum_op().call(ta, bp, kernel);
    if (tb.defined()) t_product = add_tangent(t_product, mm_op().call(ap, tb, kernel));
    set_tangent(std::get<0>(outputs), t_product);
    set_tangent(std::get<1>(outputs), t_row_sum);
    return outputs;
  }
  if (records_graph(a, b)) {
    const variable_list outputs = RowSumFunction::apply(a, b, kernel);
    return {outputs[0], outputs[1]};
  }
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return row_sum_op().call(a, b, kernel);
}

std::tuple<at::Tensor, at::Tensor> linear_tiled_weight_grad_autograd(const at::Tensor& grad,
                                                                    const at::Tensor& x, bool bias,
                                                                    c10::string_view kernel) {
  check_both_defined(kLinearTiledWeightGrad, grad, "grad", x, "x");
  const at::Tensor t_grad = tangent(grad), t_x = tangent(x);
  if (C10_UNLIKELY(t_grad.defined() || t_x.defined())) {  // bilinear in (grad, x); db linear in grad
    auto outputs = without_forward_ad([&] { return linear_tiled_weight_grad_autograd(grad, x, bias, kernel); });
    const at::Tensor grad_p = primal(grad, t_grad), x_p = primal(x, t_x);
    at::Tensor t_weight, t_bias;
    if (t_grad.defined()) std::tie(t_weight, t_bias) = weight_grad_op().call(t_grad, x_p, bias, kernel);
    if (t_x.defined()) {
      t_weight = add_tangent(t_weight, std::get<0>(weight_grad_op().call(grad_p, t_x, false, kernel)));
    }
    set_tangent(std::get<0>(outputs), t_weight);
    if (bias) set_tangent(std::get<1>(outputs), t_bias);  // else the op's empty placeholder
    return outputs;
  }
  if (records_graph(grad, x)) {
    const variable_list outputs = WeightGradFunction::apply(grad, x, bias, kernel);
    return {outputs[0], outputs[1]};
  }
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return weight_grad_op().call(grad, x, bias, kernel);
}

at::Tensor linear_tiled_autograd(const at::Tensor& x, const at::Tensor& weight,
                                 const std::optional<at::Tensor>& bias, c10::string_view kernel) {
  check_both_defined(kLinearTiled, x, "x", weight, "weight");
  const at::Tensor t_x = tangent(x), t_weight = tangent(weight), t_bias = tangent(bias);
  if (C10_UNLIKELY(t_x.defined() || t_weight.defined() || t_bias.defined())) {  // dx·Wᵀ + x·dWᵀ + db
    at::Tensor out = without_forward_ad([&] { return linear_tiled_autograd(x, weight, bias, kernel); });
    const at::Tensor x_p = primal(x, t_x), weight_p = primal(weight, t_weight);
    // db joins the first product that is computed, or stands alone, broadcast over the rows.
    std::optional<at::Tensor> bias_left =
        t_bias.defined() ? std::optional<at::Tensor>(t_bias) : std::nullopt;
    at::Tensor t_out;
    if (t_x.defined()) {
      t_out = linear_op().call(t_x, weight_p, bias_left, kernel);
      bias_left = std::nullopt;
    }
    if (t_weight.defined()) {
      t_out = add_tangent(t_out, linear_op().call(x_p, t_weight, bias_left, kernel));
      bias_left = std::nullopt;
    }
    if (bias_left.has_value()) t_out = bias_left->expand(out.sizes());
    set_tangent(out, t_out);
    return out;
  }
  if (records_graph(x, weight, bias)) return LinearFunction::apply(x, weight, bias, kernel);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  return linear_op().call(x, weight, bias, kernel);
}

}  // namespace

TORCH_LIBRARY_IMPL(gemm, Autograd, m) {
  m.impl("mm_tiled", &product_autograd<&mm_op>);
  m.impl("bmm_tiled", &product_autograd<&bmm_op>);
  m.impl("linear_tiled", &linear_tiled_autograd);
  m.impl("mm_tiled_row_sum", &mm_tiled_row_sum_autograd);
  m.impl("linear_tiled_weight_grad", &linear_tiled_weight_grad_autograd);
}

}  // namespace torch_gemm
