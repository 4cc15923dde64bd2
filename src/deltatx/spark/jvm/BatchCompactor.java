package io.deltatx.spark;

import java.io.Serializable;

import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DayTimeIntervalType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.types.YearMonthIntervalType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Moves the kept rows of a batch down, in the batch's own column vectors. Fixed-width values
 * are copied; strings, binaries, long decimals, arrays and maps move their offset and length
 * while the child data stays where it is; a struct moves each child; a column still
 * dictionary-encoded moves its dictionary ids; nulls move with their rows.
 */
public final class BatchCompactor implements Serializable {
  static final int UNMOVABLE = 0;
  static final int NOTHING = 1;
  static final int BOOLEAN = 2;
  static final int BYTE = 3;
  static final int SHORT = 4;
  static final int INT = 5;
  static final int LONG = 6;
  static final int FLOAT = 7;
  static final int DOUBLE = 8;
  static final int OFFSETS = 9;
  static final int STRUCT = 10;

  private final DataType[] types;
  private final int[] kinds;

  BatchCompactor(StructType schema) {
    StructField[] fields = schema.fields();
    types = new DataType[fields.length];
    kinds = new int[fields.length];
    for (int i = 0; i < fields.length; i++) {
      types[i] = fields[i].dataType();
      kinds[i] = kind(types[i]);
    }
  }

  /** How values of {@code type} are stored in a column vector, so how they move. */
  static int kind(DataType type) {
    if (type instanceof BooleanType) {
      return BOOLEAN;
    }
    if (type instanceof ByteType) {
      return BYTE;
    }
    if (type instanceof ShortType) {
      return SHORT;
    }
    if (type instanceof IntegerType
        || type instanceof DateType
        || type instanceof YearMonthIntervalType) {
      return INT;
    }
    if (type instanceof LongType
        || type instanceof TimestampType
        || type instanceof TimestampNTZType
        || type instanceof DayTimeIntervalType) {
      return LONG;
    }
    if (type instanceof FloatType) {
      return FLOAT;
    }
    if (type instanceof DoubleType) {
      return DOUBLE;
    }
    if (type instanceof DecimalType) {
      if (DecimalType.is32BitDecimalType(type)) {
        return INT;
      }
      return DecimalType.is64BitDecimalType(type) ? LONG : OFFSETS;
    }
    if (type instanceof StringType
        || type instanceof BinaryType
        || type instanceof ArrayType
        || type instanceof MapType) {
      return OFFSETS;
    }
    if (type instanceof StructType) {
      StructField[] fields = ((StructType) type).fields();
      for (int i = 0; i < fields.length; i++) {
        if (kind(fields[i].dataType()) == UNMOVABLE) {
          return UNMOVABLE;
        }
      }
      return STRUCT;
    }
    if (type instanceof NullType) {
      return NOTHING;
    }
    return UNMOVABLE;
  }

  /** Keeps rows {@code kept[first..size)} at positions {@code first..size} of each column. */
  void move(ColumnarBatch batch, int[] kept, int first, int size) {
    if (batch.numCols() != kinds.length) {
      throw new IllegalStateException("deltatx scan: the Parquet reader gave "
          + batch.numCols() + " columns where " + kinds.length + " were asked for");
    }
    for (int c = 0; c < kinds.length; c++) {
      ColumnVector column = batch.column(c);
      if (column instanceof WritableColumnVector) {
        move((WritableColumnVector) column, kinds[c], types[c], kept, first, size);
      } else if (!(column instanceof ConstantColumnVector)) {
        throw new IllegalStateException("deltatx scan: cannot drop deleted rows from a "
            + column.getClass().getName());
      }
    }
  }

  static void move(
      WritableColumnVector column, int kind, DataType type, int[] kept, int first, int size) {
    if (kind == NOTHING || column.isAllNull()) {
      return;
    }
    if (kind == UNMOVABLE) {
      throw new IllegalStateException("deltatx scan: cannot move values of type " + type);
    }
    // A vector that was never given a null has none to move (reset clears them with the
    // count); one that was has its flags moved, each written only where it changes.
    if (column.hasNull()) {
      for (int i = first; i < size; i++) {
        boolean isNull = column.isNullAt(kept[i]);
        if (isNull != column.isNullAt(i)) {
          if (isNull) {
            column.putNull(i);
          } else {
            column.putNotNull(i);
          }
        }
      }
    }
    if (column.hasDictionary()) {
      WritableColumnVector ids = column.getDictionaryIds();
      for (int i = first; i < size; i++) {
        ids.putInt(i, ids.getInt(kept[i]));
      }
      return;
    }
    switch (kind) {
      case BOOLEAN:
        for (int i = first; i < size; i++) {
          column.putBoolean(i, column.getBoolean(kept[i]));
        }
        break;
      case BYTE:
        for (int i = first; i < size; i++) {
          column.putByte(i, column.getByte(kept[i]));
        }
        break;
      case SHORT:
        for (int i = first; i < size; i++) {
          column.putShort(i, column.getShort(kept[i]));
        }
        break;
      case INT:
        for (int i = first; i < size; i++) {
          column.putInt(i, column.getInt(kept[i]));
        }
        break;
      case LONG:
        for (int i = first; i < size; i++) {
          column.putLong(i, column.getLong(kept[i]));
        }
        break;
      case FLOAT:
        for (int i = first; i < size; i++) {
          column.putFloat(i, column.getFloat(kept[i]));
        }
        break;
      case DOUBLE:
        for (int i = first; i < size; i++) {
          column.putDouble(i, column.getDouble(kept[i]));
        }
        break;
      case OFFSETS:
        for (int i = first; i < size; i++) {
          int from = kept[i];
          column.putArray(i, column.getArrayOffset(from), column.getArrayLength(from));
        }
        break;
      default:
        StructField[] fields = ((StructType) type).fields();
        for (int f = 0; f < fields.length; f++) {
          DataType child = fields[f].dataType();
          move(column.getChild(f), kind(child), child, kept, first, size);
        }
    }
  }
}
