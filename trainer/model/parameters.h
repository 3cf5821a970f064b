// Parameters and their gradients live in two flat buffers with the same layout in
// elements, in the order backward produces gradients (output layer first, embeddings
// last), so later data-parallel buckets are slices and an optimizer shard is one
// contiguous range. Under expert parallelism the experts' parameters, which a different
// group of replicas sums and shards, follow in a region of their own after the others. Values are in the compute dtype; gradients accumulate in F32 (F64
// when computing in F64), as Megatron's main_grad.
//
// A set that freezes its base (LoRA fine-tuning, docs/lora.md) keeps every parameter add()
// lays out in a third buffer of values alone: no gradient, no optimizer state, never in the
// flat buffers the optimizer, the gradient buckets and the gradient norm walk. Only the
// adapters (add_adapter) train.
#pragma once

#include <iterator>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace kiln {

enum class Init { Normal, Zeros, Ones };

// How a tensor-parallel rank's piece of a parameter is cut from the whole parameter: along
// `dim` (0: rows, 1: columns) the whole extent is the concatenation of `parts`, and rank r
// of tp holds the r-th 1/tp of each part, in order (a fused qkv's query, key and value
// heads; SwiGLU's gate and up halves). dim -1: every rank holds the whole parameter.
//
// Expert parallelism cuts first: the whole is `blocks` equal contiguous blocks of rows (the
// experts of each rank of an expert group), this piece lies in block `block`, and the split
// above applies within it (its parts are one block's).
struct TensorSplit {
  int dim = -1;
  std::vector<int64_t> parts;  // whole extents along dim
  int rank = 0;
  int tp = 1;
  int blocks = 1;
  int block = 0;

  bool tensor_sharded() const { return dim >= 0 && tp > 1; }
  bool sharded() const { return tensor_sharded() || blocks > 1; }
};

// Where a piece of a parameter lies in the whole (both row-major): `rows` rows of `cols`
// consecutive elements, row r at whole + r * whole_stride in the whole and at piece + r *
// piece_stride in the piece. whole_stride is the whole's row length, and each row lies in one
// row of the whole: row r of the run is row whole / whole_stride + r of the whole.
struct PieceRun {
  int64_t whole = 0, piece = 0, rows = 0, cols = 0, whole_stride = 0, piece_stride = 0;
};

struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;
  int64_t offset = 0;    // in elements, the same in both buffers
  Init init = Init::Zeros;
  double std = 0;        // for Init::Normal
  bool decay = false;    // weight decay: matrices and embeddings, not norms or biases
  int64_t real_rows = 0; // of the whole parameter: rows past this are vocabulary padding,
                         // zero and never trained
  TensorSplit split;
  // A copy of a parameter another pipeline stage owns (the last stage's tied output layer,
  // a copy of the first stage's embedding): trained in step with it, counted and saved there.
  bool copy = false;
  // Held by the ranks of an expert group in pieces (split is over the group): in the
  // expert region of the flat buffers.
  bool expert = false;
  // Frozen (a LoRA run's base): its value in the frozen buffer at `offset`, no gradient (grad
  // has no data), never in the flat buffers.
  bool frozen = false;
  // A LoRA adapter's factor (add_adapter).
  bool adapter = false;
  // Sharded in units: the unit it lies in (ParameterSet::units()); -1 when not.
  int unit = -1;

  Shape whole_shape() const;
  // The part of a flat buffer laid out like the parameters (values, gradients, moments,
  // master weights) that holds this parameter.
  Tensor view_in(const Tensor& flat) const;
  // This rank's rows below the whole parameter's real_rows.
  int64_t local_real_rows() const;
  // This rank's piece, run by run.
  std::vector<PieceRun> runs() const;
  // This rank's piece of the whole parameter's values (row-major), and back: the whole
  // parameter from every rank's piece, concatenated block by block and in tensor rank order
  // within a block (of a parameter every rank holds whole, the first copy).
  std::vector<double> piece_of(const std::vector<double>& whole) const;
  std::vector<double> whole_from(const std::vector<double>& pieces) const;
};

// How a unit of sharded data parallelism (trainer/train/sharded_units.h) is held whole:
//   Step: gathered once a step into a window of its own and kept, its gradients added up
//     there and reduced once at the step's end (the embeddings and the head of a model whose
//     output layer is tied to the embedding, which reads the embedding's values and adds to
//     its gradient at the far ends of every backward; every unit with shard_per_step);
//   Turn: a block, taking one of two windows in turn, so that the next block is gathered (and
//     the last one's gradients reduced) while one computes;
//   Ends: the embeddings and an untied head, taking one window between them: each is gathered
//     where it is read and its gradients reduced as its backward ends, as a block is.
enum class UnitHold { Step, Turn, Ends };

// A unit's two parts: its dense parameters, sharded over the data-parallel ranks (with the
// context-parallel ones), and its experts' pieces, in the experts' region, sharded over the
// expert-data-parallel ranks (the ones that hold the same experts). Each part has its own
// windows and value shards.
enum class UnitPart { Dense, Experts };
inline constexpr UnitPart kUnitParts[] = {UnitPart::Dense, UnitPart::Experts};
// A part's place in arrays kept per part, as kUnitParts lists them.
inline constexpr size_t unit_part_index(UnitPart part) { return part == UnitPart::Dense ? 0 : 1; }

struct UnitSpan {
  int64_t first = 0, last = 0;  // in the flat buffers, a multiple of the part's shards long
  int64_t window = 0;    // where it lies whole in the part's window memory
  int64_t shard_at = 0;  // where this rank's shard of it starts in the part's value shards
  int64_t size() const { return last - first; }
};

// A unit of sharded data parallelism: parameters whose values are gathered whole and whose
// gradients are reduce-scattered together. A block is one (its experts, if it has any, a
// part of it); the head (final norm and output layer) and the embeddings are units of their
// own.
struct ParameterUnit {
  UnitSpan dense, experts;
  UnitHold hold = UnitHold::Turn;
  const UnitSpan& part(UnitPart which) const { return which == UnitPart::Dense ? dense : experts; }
  UnitSpan& part(UnitPart which) { return which == UnitPart::Dense ? dense : experts; }
  bool has(UnitPart which) const { return part(which).size() > 0; }
  bool whole_step() const { return hold == UnitHold::Step; }
};

class ParameterSet {
 public:
  // freeze_base: every parameter add() lays out is frozen; only add_adapter's train.
  ParameterSet(DType value_dtype, DType grad_dtype, bool freeze_base = false)
      : value_dtype_(value_dtype), grad_dtype_(grad_dtype), freeze_base_(freeze_base) {}
  ParameterSet(const ParameterSet&) = delete;
  ParameterSet& operator=(const ParameterSet&) = delete;
  ~ParameterSet();

  // shape: this rank's piece (the whole parameter without a split); real_rows: the whole
  // parameter's (all rows when -1).
  Parameter add(const std::string& name, Shape shape, Init init, double std = 0,
                int64_t real_rows = -1, const TensorSplit& split = {}, bool copy = false);
  // A parameter that trains when the base is frozen (a LoRA adapter's factor): in the flat
  // buffers always.
  Parameter add_adapter(const std::string& name, Shape shape, Init init, double std,
                        const TensorSplit& split = {});
  // An expert-parallel piece, in the expert region; split is over the expert group.
  Parameter add_expert(const std::string& name, Shape shape, Init init, double std,
                       const TensorSplit& split);
  // Lays the flat buffers out in units before the first pass, each unit's dense part padded
  // to a multiple of `shards` (this rank's is shard `rank`), its experts' part to a multiple
  // of `expert_shards` (shard `expert_rank`): the gradients (and with shard_values the
  // values too) then live whole only in windows (UnitHold says whose), and the values
  // otherwise as this rank's shard of every unit, in the value shards.
  void shard_units(int shards, int rank, bool shard_values, int expert_shards, int expert_rank);
  // The parameters laid out from here to the next unit (or the end) are one unit, held as
  // `hold` says; returns its number in units() (-1 when not sharded in units).
  int begin_unit(UnitHold hold);
  // Starts a layout pass (the set is laid out twice, as arenas are: sizes, then memory).
  void begin_pass();
  // Allocates both buffers, each region's length padded to a multiple of its shards (the
  // distributed optimizer cuts the region into that many equal contiguous shards).
  void allocate(Ops& ops, int shards = 1, int expert_shards = 1);
  // Sets the buffers' lengths allocate() gives them, allocating nothing: a pass after it
  // places every parameter where an allocated set holds it (planning).
  void size_regions(int shards = 1, int expert_shards = 1);

  const std::vector<Parameter>& all() const { return params_; }
  const Parameter& find(const std::string& name) const;
  // The whole flat buffers, alignment gaps included (they are zero and stay zero); not
  // there when sharded in units.
  Tensor flat_values() const;
  Tensor flat_grads() const;
  // Sharded in units: the units in layout order, each part's shard count, and whether the
  // values are sharded too (else they are whole in the flat values).
  const std::vector<ParameterUnit>& units() const { return units_; }
  int unit_shards(UnitPart part = UnitPart::Dense) const { return parts_[unit_part_index(part)].shards; }
  bool values_sharded() const { return shard_values_; }
  // A part of a unit's values and gradients where it lies whole: its window (its place in
  // the flat values when they are not sharded).
  Tensor unit_values(size_t unit, UnitPart part = UnitPart::Dense) const;
  Tensor unit_grads(size_t unit, UnitPart part = UnitPart::Dense) const;
  // The rank's shard of a part of a unit's values.
  Tensor value_shard(size_t unit, UnitPart part = UnitPart::Dense) const;
  // This rank's shard of a part of a unit's values, kept in the value shards from `whole`,
  // the part's values written whole (initialised in its window, or loaded from a checkpoint).
  void keep_shard(Ops& ops, size_t unit, UnitPart part, const Tensor& whole) const;
  // Sharded values: every parameter's value (as all() lists it; the layers keep theirs)
  // viewed in `whole`, a buffer laid out like the flat values, for a checkpoint to read or
  // write them whole; a tensor without data views them in their windows again.
  void view_values_in(const Tensor& whole);
  int64_t size() const { return size_; }
  // The region before the experts' (all of it without expert parallelism), and how far the
  // parameters laid out so far in this pass reach into it.
  int64_t dense_size() const { return dense_size_; }
  int64_t dense_laid_out() const { return next_; }
  // Trainable elements on this rank, padding and copies excluded.
  int64_t count() const;
  // Trainable elements of the parameters here, whole over every tensor-parallel piece
  // (copies excluded); with frozen too, the frozen ones' as well.
  int64_t whole_count(bool with_frozen = false) const;
  bool freezes_base() const { return freeze_base_; }
  DType value_dtype() const { return value_dtype_; }
  DType grad_dtype() const { return grad_dtype_; }
  // The memory the values and the gradients take outside the windows: the whole flat
  // buffers, or the value shards (and of the gradients none: their shards are the
  // optimizer's).
  size_t value_bytes() const;
  size_t grad_bytes() const;
  // The windows' memory, for the gradients and the sharded values (0 without units).
  size_t window_bytes() const;
  // The frozen parameters' buffer (0 unless the base is frozen).
  size_t frozen_bytes() const { return static_cast<size_t>(frozen_size_) * dtype_size(value_dtype_); }

 private:
  DType value_dtype_, grad_dtype_;
  bool freeze_base_ = false;
  Ops* owner_ = nullptr;
  bool sized_ = false;  // the regions' lengths are set: later passes place into them
  Device device_ = Device::Cpu;
  void* values_ = nullptr;
  void* grads_ = nullptr;
  void* frozen_values_ = nullptr;
  int64_t size_ = 0;    // elements in each buffer
  int64_t dense_size_ = 0;
  int64_t next_ = 0;         // end of the last tensor laid out in this pass
  int64_t expert_next_ = 0;  // the same in the expert region, from its start
  int64_t frozen_next_ = 0;  // the same in the frozen buffer
  int64_t frozen_size_ = 0;
  std::vector<Parameter> params_;
  // Sharded in units (shard_units): per part, its shards (0 when not sharded in units), this
  // rank's, and its windows' and value shards' memory.
  struct PartMemory {
    int shards = 0;
    int rank = 0;
    int64_t window_size = 0;  // elements of window memory
    void* window_values = nullptr;  // with sharded values
    void* window_grads = nullptr;
    void* value_shards = nullptr;   // with sharded values
    int64_t region_size = 0;        // elements of the part's region of the flat buffers
  };
  bool shard_values_ = false;
  PartMemory parts_[std::size(kUnitParts)];
  std::vector<ParameterUnit> units_;
  int current_unit_ = -1;     // of this pass

  bool in_units() const { return parts_[0].shards > 0; }
  // Where the parameter at `offset` lies in a flat buffer, and in its unit's window of its
  // part (null: the buffer or the windows are not allocated yet).
  void* place_in(void* buffer, DType dtype, int64_t offset) const;
  void* place_in_window(void* windows, DType dtype, int64_t offset, size_t unit, UnitPart part) const;
  // The units' windows and shard places, once the last unit's end is known.
  void place_units();

  Parameter place(const std::string& name, Shape shape, int64_t offset, Init init, double std,
                  const TensorSplit& split, bool frozen, bool expert = false);
  Parameter add_trainable(const std::string& name, Shape shape, Init init, double std, int64_t real_rows,
                          const TensorSplit& split, bool copy);
  Parameter add_frozen(const std::string& name, Shape shape, Init init, double std, int64_t real_rows,
                       const TensorSplit& split, bool copy);
};

}  // namespace kiln
