// How the row kernels share out their work: units of rowsPerUnit consecutive
// rows of one token, unit u = chunk * T + t, walked grid-stride by lane groups
// (a group: the lanes of one row), ROWS rows per step.
#pragma once

namespace kvkit {

// One step of a lane group: rows [row, row + ROWS) of token t, `left` of them in its unit.
struct UnitStep {
  unsigned warpUnit;  // the unit of the warp's first group: the same in every lane of a warp
  unsigned r;         // the step's first row counted within its unit
  unsigned t;
  unsigned row;       // counted within the token's rows
  unsigned left;      // rows of the unit from `row` on; 0: nothing for this group this step
};

/**
 * Every lane of a warp takes the same steps (its rows reduce and rotate with
 * shuffles), so the walk follows the warp's first group; a group whose unit
 * is past the end idles through them. Unit and row counts are 32-bit: the
 * host takes this path only for launches of fewer than 2^31 rows
 * (rowTiles.ts), so a unit plus the grid stride stays below 2^32; element
 * offsets are formed in 64 bits by the kernels.
 */
struct UnitWalk {
  unsigned tokens;
  unsigned rowsPerToken;
  unsigned rowsPerUnit;
  unsigned units;
  unsigned groups;       // lane groups in the grid: the stride between a group's units
  unsigned groupInWarp;  // this group's offset from its warp's first group
  unsigned firstWarpUnit;

  __device__ __forceinline__ UnitWalk(long long numTokens, unsigned rowsPerTokenIn, long long rowsPerUnitIn, long long unitsPerToken, int lanes)
      : tokens(static_cast<unsigned>(numTokens)),
        rowsPerToken(rowsPerTokenIn),
        rowsPerUnit(static_cast<unsigned>(rowsPerUnitIn)),
        units(static_cast<unsigned>(numTokens) * static_cast<unsigned>(unitsPerToken)) {
    const unsigned groupsPerBlock = blockDim.x / lanes;
    groups = gridDim.x * groupsPerBlock;
    groupInWarp = (threadIdx.x & 31u) / lanes;
    firstWarpUnit = blockIdx.x * groupsPerBlock + (threadIdx.x & ~31u) / lanes;
  }

  __device__ __forceinline__ UnitStep at(unsigned warpUnit, unsigned r) const {
    UnitStep s{warpUnit, r, 0, 0, 0};
    const unsigned unit = warpUnit + groupInWarp;
    if (unit < units) {
      const unsigned chunk = unit / tokens;
      const unsigned first = chunk * rowsPerUnit;
      const unsigned here = min(rowsPerUnit, rowsPerToken - first);
      s.t = unit - chunk * tokens;
      s.row = first + r;
      s.left = r < here ? here - r : 0;
    }
    return s;
  }

  __device__ __forceinline__ UnitStep first() const { return at(firstWarpUnit, 0); }

  __device__ __forceinline__ bool done(const UnitStep& s) const { return s.warpUnit >= units; }

  // The step after s: the unit's next ROWS rows, or the start of the group's next unit.
  template <int ROWS>
  __device__ __forceinline__ UnitStep next(const UnitStep& s) const {
    if (s.r + ROWS < rowsPerUnit) {
      UnitStep n = s;
      n.r += ROWS;
      n.row += ROWS;
      n.left = s.left > ROWS ? s.left - ROWS : 0;
      return n;
    }
    return at(s.warpUnit + groups, 0);
  }
};

}  // namespace kvkit
